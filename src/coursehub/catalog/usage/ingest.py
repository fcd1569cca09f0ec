"""Usage files read into the catalog (``coursehub usage ingest``), and the retention.

:func:`ingest_folder` reads what was appended to each usage file since last
time (``usage_journals`` keeps the offsets), decides who wrote it
(:mod:`coursehub.catalog.usage.trust`) and applies its records
(:func:`coursehub.catalog.usage.rollup.apply_records`).

Retention (:func:`prune_usage`, ``coursehub usage prune``): unit rows of
units ended more than :data:`KEEP_UNITS_DAYS` days ago are deleted; rollup
rows are kept :data:`KEEP_DAYS_DAYS` days (five academic years); usage files
read to their end and older than :data:`KEEP_FILES_DAYS` days are removed.
"""

from __future__ import annotations

import contextlib
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import CursorResult, Delete, delete, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from coursehub.catalog.models.courses import Course, Membership, Person
from coursehub.catalog.models.usage import UsageDay, UsageJournal, UsageUnit
from coursehub.catalog.people import normalize_username
from coursehub.catalog.usage.rollup import apply_records, chunks
from coursehub.catalog.usage.trust import charged_course, file_writer, user_record_problem
from coursehub.meter.bounds import HostLimits, bounds_problem, host_limits
from coursehub.meter.journal import JournalError, list_journals, read_records
from coursehub.meter.records import shown
from coursehub.meter.sampler import job_folder

#: Days a unit row is kept after its unit ended.
KEEP_UNITS_DAYS = 400
#: Days a daily rollup row is kept (five academic years).
KEEP_DAYS_DAYS = 5 * 366
#: Days a fully read usage file is kept.
KEEP_FILES_DAYS = 14


@dataclass
class IngestOutcome:
    """What :func:`ingest_folder` did: records applied, lines and files refused and why."""

    records: int = 0
    refused: list[str] = field(default_factory=list)


def member_courses(session: Session, usernames: Iterable[str]) -> dict[str, frozenset[str]]:
    """Return, per user name, the ids of the courses they are a student or in the team of."""
    wanted = sorted({normalize_username(name) for name in usernames})
    found: dict[str, set[str]] = {name: set() for name in wanted}
    for chunk in chunks(wanted):
        query = (
            select(Person.username, Course.course_id)
            .join(Membership, Membership.person_pk == Person.id)
            .join(Course, Course.id == Membership.course_pk)
            .where(Person.username.in_(chunk))
        )
        for username, course_id in session.execute(query):
            found[username].add(course_id)
    return {name: frozenset(ids) for name, ids in found.items()}


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


def ingest_hub(session: Session, folder: Path, limits: HostLimits | None = None) -> IngestOutcome:
    """Read a hub's usage folder, then its jobs' folder (``FOLDER-jobs``) when it exists.

    The jobs' files are all read as written by their owners
    (``hub_folder=False``, :func:`ingest_folder`). Flushes, never commits.

    Raises
    ------
    OSError
        If a folder itself cannot be listed.
    """
    limits = host_limits() if limits is None else limits
    outcome = ingest_folder(session, folder, limits=limits)
    jobs = job_folder(folder)  # the runner jobs of the hub's servers, when there are any
    if jobs.is_dir():
        more = ingest_folder(session, jobs, hub_folder=False, limits=limits)
        outcome.records += more.records
        outcome.refused += more.refused
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
