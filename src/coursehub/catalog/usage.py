"""Usage in the catalog: one row per server or runner job, rolled up per course, student and day.

Tables (migration ``0006``):

``usage_units``
    One row per server or job (``unit_id``): user, course, start, last record,
    end, CPU-seconds, peak memory, GPU-seconds, peak GPU memory, exit reason.
``usage_days``
    The rollup: per ``course_id``, UTC ``day`` and ``username``, the CPU- and
    GPU-seconds used that day, the day's peak memory of one unit, and the
    units started that day. A sample's increase since the previous record of
    its unit is added to the sample's day (so usage across midnight lands on
    either side within one sampling interval).
``usage_journals``
    How far each usage file was read (byte offset), so that ingesting again
    reads only what was appended.

Retention (:func:`prune_usage`, ``coursehub usage prune``): unit rows of
units ended more than :data:`KEEP_UNITS_DAYS` days ago are deleted; rollup
rows are kept :data:`KEEP_DAYS_DAYS` days (five academic years); usage files
read to their end and older than :data:`KEEP_FILES_DAYS` days are removed.

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

import contextlib
import os
import pwd
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    CursorResult,
    Delete,
    delete,
    select,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from coursehub.catalog.models.courses import Course, Membership, Person
from coursehub.catalog.models.usage import UsageDay, UsageJournal, UsageUnit
from coursehub.catalog.people import normalize_username
from coursehub.meter.bounds import HostLimits, bounds_problem, host_limits, time_problem
from coursehub.meter.journal import JournalError, list_journals, read_records
from coursehub.meter.records import MAX_TEXT, UsageRecord, shown

#: Days a unit row is kept after its unit ended.
KEEP_UNITS_DAYS = 400
#: Days a daily rollup row is kept (five academic years).
KEEP_DAYS_DAYS = 5 * 366
#: Days a fully read usage file is kept.
KEEP_FILES_DAYS = 14


#: The unit id namespace of records a user writes (runner jobs: ``job:<host>:<job id>``).
USER_UNIT_PREFIX = "job:"
#: Joins a user's unit id and their name in :func:`scoped_unit_id` (never in a user's unit id).
SCOPE_SEP = "#"


@dataclass
class IngestOutcome:
    """What :func:`ingest_folder` did: records applied, lines and files refused and why."""

    records: int = 0
    refused: list[str] = field(default_factory=list)


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
        (:func:`member_courses`).

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


def member_courses(session: Session, usernames: Iterable[str]) -> dict[str, frozenset[str]]:
    """Return, per user name, the ids of the courses they are a student or in the team of."""
    wanted = sorted({normalize_username(name) for name in usernames})
    found: dict[str, set[str]] = {name: set() for name in wanted}
    for chunk in _chunks(wanted):
        query = (
            select(Person.username, Course.course_id)
            .join(Membership, Membership.person_pk == Person.id)
            .join(Course, Course.id == Membership.course_pk)
            .where(Person.username.in_(chunk))
        )
        for username, course_id in session.execute(query):
            found[username].add(course_id)
    return {name: frozenset(ids) for name, ids in found.items()}


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def apply_records(
    session: Session,
    records: list[UsageRecord],
    *,
    from_hub: bool = True,
    limits: HostLimits | None = None,
    now: float | None = None,
    refused: list[str] | None = None,
    where: str = "",
) -> int:
    """Apply usage records to the unit rows and the daily rollup; return how many applied.

    Counters only grow: a record older than its unit's last one adds nothing.
    A hub record (``from_hub``) naming a unit of another user or kind is
    skipped, except that it takes over a unit a user's record made: its row
    then starts again from the hub's figures. A user's record never touches
    a unit of the hub or of another user: when one holds its unit id, it
    goes to the row :func:`scoped_unit_id`. Every record's times are checked against the
    clock (:func:`coursehub.meter.bounds.time_problem`); a user's record
    also against the host's size (:func:`coursehub.meter.bounds.bounds_problem`,
    ``limits``, default this host's), from its unit's first start. Skipped
    records are listed in ``refused`` (``"<where>: <unit id>: <why>"``).
    Flushes, never commits.

    Parameters
    ----------
    session
        The catalog session.
    records
        Records in file order (a user's already checked by :func:`user_record_problem`).
    from_hub
        True for the hub's own records, False for a user's.
    limits
        The hub host's size, the bounds of a user's records (default: this host's).
    now
        Unix time of the check, in seconds (default: the clock).
    refused
        Where to list the records skipped and why (None: not listed).
    where
        The file name the records come from, for ``refused``.
    """
    now = time.time() if now is None else now
    if not from_hub and limits is None:
        limits = host_limits()
    ids = {r.unit_id for r in records}
    if not from_hub:
        ids |= {scoped_unit_id(r.unit_id, r.user) for r in records}
    units = {
        u.unit_id: u
        for chunk in _chunks(sorted(ids))
        for u in session.scalars(select(UsageUnit).where(UsageUnit.unit_id.in_(chunk)))
    }
    days: dict[tuple[str, date, str], UsageDay] = {}
    applied = 0
    for record in records:
        key = record.unit_id
        unit = units.get(key)
        if not from_hub and unit is not None and not _users_own(unit, record):
            key = scoped_unit_id(record.unit_id, record.user)  # claimed first by another
            unit = units.get(key)
        takeover = unit is not None and from_hub and not unit.from_hub
        why = _unit_problem(unit, record, from_hub)
        if why is None:
            started = unit.started_at.timestamp() if unit is not None and not takeover else None
            why = (
                time_problem(record, now, started)
                if from_hub or limits is None
                else bounds_problem(record, limits, now, started)
            )
        if why is not None:
            if refused is not None:
                refused.append(f"{where}: {shown(record.unit_id)}: {why}")
            continue
        if unit is not None and takeover:
            _take_over(unit, record)  # a user claimed the hub's unit id first: the hub's wins
        applied += 1
        new = unit is None
        if unit is None:
            unit = UsageUnit(
                unit_id=key,
                kind=record.kind,
                username=record.user,
                course_id=record.course_id,
                started_at=_time(record.started_at),
                last_at=_time(record.started_at),
                cpu_s=0.0,
                mem_peak_bytes=0,
                gpu_s=0.0,
                gpu_peak_bytes=0,
                exit_reason="",
                from_hub=from_hub,
            )
            session.add(unit)
            units[key] = unit
        _add(session, days, unit, record, new)
    session.flush()
    return applied


def scoped_unit_id(unit_id: str, user: str) -> str:
    """Return the row id of a user's unit whose id another user or the hub holds already.

    ``<unit id>#<user>`` (at most 300 characters, the column's size): a unit
    id claimed first by someone else hides nothing of ``user``'s unit.
    """
    return f"{unit_id[:MAX_TEXT]}{SCOPE_SEP}{user[:99]}"


def _users_own(unit: UsageUnit, record: UsageRecord) -> bool:
    return not unit.from_hub and (unit.username, unit.kind) == (record.user, record.kind)


def _unit_problem(unit: UsageUnit | None, record: UsageRecord, from_hub: bool) -> str | None:
    if unit is None or (from_hub and not unit.from_hub):
        return None
    if not from_hub and unit.from_hub:
        return "a unit of the hub's records"
    if (unit.username, unit.kind) != (record.user, record.kind):
        return "another user's unit id"  # never charge (or credit) someone else
    return None


def _take_over(unit: UsageUnit, record: UsageRecord) -> None:
    """Give a user-made unit row to the hub's record (what the user claimed stays theirs)."""
    unit.kind, unit.username, unit.course_id = record.kind, record.user, record.course_id
    unit.started_at = unit.last_at = _time(record.started_at)
    unit.cpu_s, unit.gpu_s, unit.mem_peak_bytes, unit.gpu_peak_bytes = 0.0, 0.0, 0, 0
    unit.ended_at, unit.exit_reason, unit.from_hub = None, "", True


def _add(
    session: Session,
    days: dict[tuple[str, date, str], UsageDay],
    unit: UsageUnit,
    record: UsageRecord,
    new: bool,
) -> None:
    row = _day_row(session, days, unit.course_id, _time(record.at).date(), unit.username)
    if new:
        row.units += 1
    row.cpu_s += max(0.0, record.cpu_s - unit.cpu_s)
    row.gpu_s += max(0.0, record.gpu_s - unit.gpu_s)
    row.mem_peak_bytes = max(row.mem_peak_bytes, record.mem_peak_bytes)
    unit.cpu_s = max(unit.cpu_s, record.cpu_s)
    unit.gpu_s = max(unit.gpu_s, record.gpu_s)
    unit.mem_peak_bytes = max(unit.mem_peak_bytes, record.mem_peak_bytes)
    unit.gpu_peak_bytes = max(unit.gpu_peak_bytes, record.gpu_peak_bytes)
    unit.last_at = max(unit.last_at, _time(record.at))
    if record.event == "close":
        unit.ended_at = _time(record.at)
        unit.exit_reason = record.exit_reason


def _day_row(
    session: Session,
    cache: dict[tuple[str, date, str], UsageDay],
    course_id: str,
    day: date,
    username: str,
) -> UsageDay:
    key = (course_id, day, username)
    row = cache.get(key)
    if row is None:
        row = session.scalars(
            select(UsageDay).where(
                UsageDay.course_id == course_id, UsageDay.day == day, UsageDay.username == username
            )
        ).one_or_none()
        if row is None:
            row = UsageDay(
                course_id=course_id,
                day=day,
                username=username,
                cpu_s=0.0,
                gpu_s=0.0,
                mem_peak_bytes=0,
                units=0,
            )
            session.add(row)
        cache[key] = row
    return row


def ingest_folder(
    session: Session,
    folder: Path,
    *,
    hub_folder: bool = True,
    limits: HostLimits | None = None,
    now: float | None = None,
) -> IngestOutcome:
    """Read what was appended to the usage files of ``folder`` since last time, and apply it.

    Each file is read and applied on its own (a savepoint): a file that
    cannot be read (a symbolic link, not a regular file, too large,
    unreadable) or applied is reported and skipped, and the others are
    ingested. A file's new offset is stored with its records in the same
    transaction (the caller commits), so a record is applied once. Lines
    that are not records and records refused (:func:`user_record_problem`,
    :func:`charged_course`, the bounds) are listed.

    Parameters
    ----------
    session
        The catalog session.
    folder
        The usage folder.
    hub_folder
        True for the hub's own usage folder, False for a folder users write
        to (the jobs folder): :func:`file_writer`.
    limits
        The size of the hub's host, the bounds of users' records (default:
        this host, :func:`coursehub.meter.bounds.host_limits`).
    now
        Unix time of the ingest, in seconds (default: the clock).

    Raises
    ------
    OSError
        If the folder itself cannot be listed (a file's error is reported, not raised).
    """
    limits = host_limits() if limits is None else limits
    now = time.time() if now is None else now
    outcome = IngestOutcome()
    if hub_folder and Path(folder).is_dir() and Path(folder).stat().st_mode & 0o022:
        hub_folder = False  # others may write there: nothing in it is the hub's own
        outcome.refused.append(f"{folder}: writable by others: its files are read as users'")
    for path in list_journals(folder):
        try:
            with session.begin_nested():
                _ingest_file(session, path, hub_folder, limits, now, outcome)
        except (JournalError, OSError, SQLAlchemyError) as exc:
            outcome.refused.append(f"{shown(path.name)}: skipped: {exc}")
    session.flush()
    return outcome


def _ingest_file(
    session: Session,
    path: Path,
    hub_folder: bool,
    limits: HostLimits,
    now: float,
    outcome: IngestOutcome,
) -> None:
    mark = session.scalars(select(UsageJournal).where(UsageJournal.path == str(path))).one_or_none()
    offset = 0 if mark is None else mark.offset
    info = path.lstat()  # a link or a FIFO goes on to be refused by read_records
    if stat.S_ISREG(info.st_mode) and info.st_size <= offset:
        return
    batch = read_records(path, offset)
    where = shown(path.name)
    if mark is None:
        mark = UsageJournal(path=str(path), offset=0)
        session.add(mark)
    mark.offset = batch.offset
    outcome.refused += batch.problems
    writer = file_writer(batch.owner_uid, hub_folder)
    if not writer.hub and batch.links != 1:
        outcome.refused.append(f"{where}: skipped: a file with {batch.links} hard links")
        return
    courses = {} if writer.hub else member_courses(session, [writer.user])
    mine = courses.get(normalize_username(writer.user), frozenset())
    taken, noted = [], set()
    for record in batch.records:
        why = user_record_problem(record, writer)
        if why is None and not writer.hub:  # out of bounds: refused before any course note
            why = bounds_problem(record, limits, now)
        if why is not None:
            outcome.refused.append(f"{where}: {shown(record.unit_id)}: {why}")
            continue
        course_id, note = charged_course(record, writer, mine)
        if note is not None:
            if record.unit_id not in noted:  # once per unit, not for each of its samples
                noted.add(record.unit_id)
                outcome.refused.append(f"{where}: {shown(record.unit_id)}: {note}")
            record = replace(record, course_id=course_id)
        taken.append(record)
    outcome.records += apply_records(
        session,
        taken,
        from_hub=writer.hub,
        limits=limits,
        now=now,
        refused=outcome.refused,
        where=where,
    )


def prune_usage(session: Session, folder: Path | None = None, now: datetime | None = None) -> int:
    """Apply the retention: delete old unit and rollup rows, and old fully read usage files.

    Returns the number of rows and files removed. Flushes, never commits.
    """
    now = now or datetime.now(UTC)
    removed = _deleted(
        session,
        delete(UsageUnit).where(UsageUnit.ended_at < now - timedelta(days=KEEP_UNITS_DAYS)),
    )
    removed += _deleted(
        session,
        delete(UsageDay).where(UsageDay.day < (now - timedelta(days=KEEP_DAYS_DAYS)).date()),
    )
    if folder is not None:
        limit = (now - timedelta(days=KEEP_FILES_DAYS)).timestamp()
        for path in list_journals(folder):
            mark = session.scalars(
                select(UsageJournal).where(UsageJournal.path == str(path))
            ).one_or_none()
            info = path.lstat()  # a symbolic link is never followed
            if mark is not None and mark.offset >= info.st_size and info.st_mtime < limit:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                session.delete(mark)
                removed += 1
    session.flush()
    return int(removed)


def _deleted(session: Session, statement: Delete) -> int:
    result = cast("CursorResult[Any]", session.execute(statement))
    return int(result.rowcount)


def _chunks(values: list[str], size: int = 500) -> list[list[str]]:
    return [values[i : i + size] for i in range(0, len(values), size)] or [[]]
