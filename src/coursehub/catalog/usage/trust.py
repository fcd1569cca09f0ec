"""Who wrote a usage record, and what a user's record may claim (pure).

Trust (docs/security.md, "Usage records"): who wrote a file is decided in
one place, :func:`file_writer`, from the owner of the opened file
(``fstat(2)``, :func:`coursehub.meter.journal.read_records`) and the folder
it lies in. Only a file of root or of this process's user in the hub's own
usage folder is the hub's; any other file (every file of the jobs folder) is
its owner's, and its records pass :func:`user_record_problem` (a job of the
owner, a job unit id) and :func:`charged_course` (a course the owner is a
student or in the team of, else none). Every record passes
:func:`coursehub.meter.bounds.time_problem`, a user's record also
:func:`coursehub.meter.bounds.bounds_problem`. A hub record for a unit id a
user's record claimed first takes the unit over; a user's record never
touches a unit of the hub or of another user (:func:`scoped_unit_id`).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from coursehub.meter.records import MAX_TEXT, UsageRecord

#: The unit id namespace of records a user writes (runner jobs: ``job:<host>:<job id>``).
USER_UNIT_PREFIX = "job:"
#: Joins a user's unit id and their name in :func:`scoped_unit_id` (never in a user's unit id).
SCOPE_SEP = "#"


@dataclass(frozen=True)
class Writer:
    """Who wrote a usage file: the hub (``hub``), else the Unix user ``user``.

    ``user`` is ``""`` for a file whose owner has no account: none of its
    records is taken.
    """

    hub: bool
    user: str = ""

    def describe(self) -> str:
        """``"the hub"`` or ``"user 'ada'"``, for messages."""
        return "the hub" if self.hub else f"user {self.user!r}"


#: The writer of a file that is the hub's own.
HUB = Writer(hub=True)


def file_writer(owner_uid: int, hub_folder: bool) -> Writer:
    """Return who wrote a usage file: the one place a record's author is decided.

    Parameters
    ----------
    owner_uid
        The file's owner, from ``fstat(2)`` of the descriptor its lines were
        read from (:attr:`coursehub.meter.journal.ReadBatch.owner_uid`).
    hub_folder
        True for a file of the hub's own usage folder (owner-only, mode
        0700), False for a place users write (the jobs folder, mode 1733).

    Returns
    -------
    Writer
        The hub for a file of root or of this process's user in the hub's
        folder; otherwise the owner's account name (a root-owned file of the
        jobs folder is root's as a user, never the hub's).
    """
    if hub_folder and owner_uid in {0, os.getuid(), os.geteuid()}:
        return HUB
    try:
        return Writer(hub=False, user=pwd.getpwuid(owner_uid).pw_name)
    except KeyError:
        return Writer(hub=False, user="")


def user_record_problem(record: UsageRecord, writer: Writer) -> str | None:
    """Return why a user's ``record`` is not theirs to write, or None (always None for the hub).

    A user writes only records of their own runner jobs: ``kind`` ``job``,
    ``user`` their account, a unit id in the job namespace
    (:data:`USER_UNIT_PREFIX`), so never a server's id of the hub, and
    without :data:`SCOPE_SEP` (:func:`scoped_unit_id`).
    """
    if writer.hub:
        return None
    if not writer.user:
        return "a file whose owner has no account"
    if record.user != writer.user:
        return f"names user {record.user!r} in a file of {writer.describe()}"
    if record.kind != "job":
        return f"a {record.kind} record in a file of {writer.describe()} (users write jobs only)"
    if not record.unit_id.startswith(USER_UNIT_PREFIX):
        return f"unit id {record.unit_id!r} is not a job id ({USER_UNIT_PREFIX}...)"
    if SCOPE_SEP in record.unit_id:
        return f"unit id {record.unit_id!r} holds {SCOPE_SEP!r}"
    return None


def charged_course(
    record: UsageRecord, writer: Writer, courses: frozenset[str]
) -> tuple[str, str | None]:
    """Return the course to charge for ``record`` and, when it is not the record's, why.

    Parameters
    ----------
    record
        The record.
    writer
        Who wrote it (:func:`file_writer`).
    courses
        The course ids in which the writer is a student or in the team
        (:func:`coursehub.catalog.usage.ingest.member_courses`).

    Returns
    -------
    tuple of (str, str or None)
        The hub's record keeps its course; a user's record keeps it only
        when it is one of ``courses``, else it is charged to no course
        (``""``) with the reason.
    """
    if writer.hub or not record.course_id or record.course_id in courses:
        return record.course_id, None
    return "", f"{writer.describe()} is not in course {record.course_id!r}: charged to no course"


def scoped_unit_id(unit_id: str, user: str) -> str:
    """Return the row id of a user's unit whose id another user or the hub holds already.

    ``<unit id>#<user>`` (at most 300 characters, the column's size): a unit
    id claimed first by someone else hides nothing of ``user``'s unit.
    """
    return f"{unit_id[:MAX_TEXT]}{SCOPE_SEP}{user[:99]}"
