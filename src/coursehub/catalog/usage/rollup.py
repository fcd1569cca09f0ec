"""Usage records applied to the unit rows and the daily rollup (:func:`apply_records`).

Counters only grow; a sample's increase since the previous record of its
unit is added to the sample's UTC day. The tables:
:mod:`coursehub.catalog.models.usage`; who may write what:
:mod:`coursehub.catalog.usage.trust`.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.models.usage import UsageDay, UsageUnit
from coursehub.catalog.usage.trust import scoped_unit_id
from coursehub.meter.bounds import HostLimits, bounds_problem, host_limits, time_problem
from coursehub.meter.records import UsageRecord, shown


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
        Records in file order (a user's already checked by
            :func:`~coursehub.catalog.usage.trust.user_record_problem`).
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
    units = _load_units(session, records, from_hub)
    days: dict[tuple[str, date, str], UsageDay] = {}
    applied = 0
    for record in records:
        key = record.unit_id
        unit = units.get(key)
        if not from_hub and unit is not None and not _users_own(unit, record):
            key = scoped_unit_id(record.unit_id, record.user)  # claimed first by another
            unit = units.get(key)
        takeover = unit is not None and from_hub and not unit.from_hub
        why = _record_problem(unit, record, from_hub, takeover, limits, now)
        if why is not None:
            if refused is not None:
                refused.append(f"{where}: {shown(record.unit_id)}: {why}")
            continue
        if unit is not None and takeover:
            _take_over(unit, record)  # a user claimed the hub's unit id first: the hub's wins
        applied += 1
        new = unit is None
        if unit is None:
            unit = _new_unit(key, record, from_hub)
            session.add(unit)
            units[key] = unit
        _add(session, days, unit, record, new)
    session.flush()
    return applied


def _load_units(
    session: Session, records: list[UsageRecord], from_hub: bool
) -> dict[str, UsageUnit]:
    """Return the unit rows the records may touch, by unit id (a user's scoped ids too)."""
    ids = {r.unit_id for r in records}
    if not from_hub:
        ids |= {scoped_unit_id(r.unit_id, r.user) for r in records}
    return {
        u.unit_id: u
        for chunk in chunks(sorted(ids))
        for u in session.scalars(select(UsageUnit).where(UsageUnit.unit_id.in_(chunk)))
    }


def _record_problem(
    unit: UsageUnit | None,
    record: UsageRecord,
    from_hub: bool,
    takeover: bool,
    limits: HostLimits | None,
    now: float,
) -> str | None:
    """Why ``record`` is skipped (its unit's owner, its times, a user's bounds), or None."""
    why = _unit_problem(unit, record, from_hub)
    if why is None:
        started = unit.started_at.timestamp() if unit is not None and not takeover else None
        why = (
            time_problem(record, now, started)
            if from_hub or limits is None
            else bounds_problem(record, limits, now, started)
        )
    return why


def _new_unit(unit_id: str, record: UsageRecord, from_hub: bool) -> UsageUnit:
    """A unit row for the first record of a unit, its counters at zero."""
    return UsageUnit(
        unit_id=unit_id,
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


def chunks(values: list[str], size: int = 500) -> list[list[str]]:
    """Return ``values`` in lists of ``size`` (one ``IN (...)`` query each); ``[[]]`` for none."""
    return [values[i : i + size] for i in range(0, len(values), size)] or [[]]
