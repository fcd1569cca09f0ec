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

Trust: a job record is ingested only from a file owned by the record's user
(or by root or this process's user): a student cannot charge another user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    CursorResult,
    Date,
    Delete,
    Float,
    Integer,
    String,
    UniqueConstraint,
    delete,
    select,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from coursehub.catalog.models import Base, UTCDateTime
from coursehub.meter.journal import list_journals, read_records
from coursehub.meter.records import UsageRecord

#: Days a unit row is kept after its unit ended.
KEEP_UNITS_DAYS = 400
#: Days a daily rollup row is kept (five academic years).
KEEP_DAYS_DAYS = 5 * 366
#: Days a fully read usage file is kept.
KEEP_FILES_DAYS = 14


class UsageUnit(Base):
    """One server or runner job and what it used (cumulative, last record)."""

    __tablename__ = "usage_units"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    unit_id: Mapped[str] = mapped_column(String(300), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    username: Mapped[str] = mapped_column(String(200))
    course_id: Mapped[str] = mapped_column(String(200), index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    mem_peak_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_peak_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    exit_reason: Mapped[str] = mapped_column(String(200), default="")


class UsageDay(Base):
    """The rollup: what one user used in one course on one UTC day."""

    __tablename__ = "usage_days"
    __table_args__ = (UniqueConstraint("course_id", "day", "username"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    course_id: Mapped[str] = mapped_column(String(200))
    day: Mapped[date] = mapped_column(Date, index=True)
    username: Mapped[str] = mapped_column(String(200))
    cpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    mem_peak_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    units: Mapped[int] = mapped_column(Integer, default=0)


class UsageJournal(Base):
    """How far one usage file has been read."""

    __tablename__ = "usage_journals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    path: Mapped[str] = mapped_column(String(1000), unique=True)
    offset: Mapped[int] = mapped_column(BigInteger, default=0)


@dataclass
class IngestOutcome:
    """What :func:`ingest_folder` did: records applied, lines refused and why."""

    records: int = 0
    refused: list[str] = field(default_factory=list)


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def apply_records(session: Session, records: list[UsageRecord]) -> int:
    """Apply usage records to the unit rows and the daily rollup; return how many applied.

    Counters only grow: a record older than its unit's last one adds nothing.
    A record naming a unit of another user or kind is skipped. Flushes, never
    commits.
    """
    ids = {r.unit_id for r in records}
    units = {
        u.unit_id: u
        for chunk in _chunks(sorted(ids))
        for u in session.scalars(select(UsageUnit).where(UsageUnit.unit_id.in_(chunk)))
    }
    days: dict[tuple[str, date, str], UsageDay] = {}
    applied = 0
    for record in records:
        unit = units.get(record.unit_id)
        if unit is not None and (unit.username, unit.kind) != (record.user, record.kind):
            continue  # another user's unit id: never charge (or credit) someone else
        applied += 1
        new = unit is None
        if unit is None:
            unit = UsageUnit(
                unit_id=record.unit_id,
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
            )
            session.add(unit)
            units[record.unit_id] = unit
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
    session.flush()
    return applied


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


def ingest_folder(session: Session, folder: Path) -> IngestOutcome:
    """Read what was appended to the usage files of ``folder`` since last time, and apply it.

    Each file's new offset is stored with the records in the same transaction
    (the caller commits), so a record is applied once. Lines that are not
    records, and job records in a file not owned by their user, are refused
    and listed.

    Raises
    ------
    OSError
        If a file cannot be read.
    """
    outcome = IngestOutcome()
    for path in list_journals(folder):
        mark = session.scalars(
            select(UsageJournal).where(UsageJournal.path == str(path))
        ).one_or_none()
        if mark is None:
            mark = UsageJournal(path=str(path), offset=0)
            session.add(mark)
        if path.stat().st_size <= mark.offset:
            continue
        batch = read_records(path, mark.offset)
        owner = _owner(path)
        trusted = [r for r in batch.records if _may_write(owner, r)]
        outcome.refused += batch.problems
        outcome.refused += [
            f"{path.name}: job {r.unit_id} of {r.user!r} in a file owned by {owner!r}"
            for r in batch.records
            if not _may_write(owner, r)
        ]
        outcome.records += apply_records(session, trusted)
        mark.offset = batch.offset
    session.flush()
    return outcome


def _owner(path: Path) -> str:
    uid = path.stat().st_uid
    if uid in (0, os.getuid()):
        return ""  # the hub or the course app: trusted for every user
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _may_write(owner: str, record: UsageRecord) -> bool:
    return owner == "" or (record.kind == "job" and record.user == owner)


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
            stat = path.stat()
            if mark is not None and mark.offset >= stat.st_size and stat.st_mtime < limit:
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
