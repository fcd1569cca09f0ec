"""The ``backup`` check: how old this host's last backup is (docs/backup.md, docs/doctor.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from coursehub.doctor.result import CheckResult, ok, warn

#: What to run, for the lines of a warning.
ADVICE = "run `coursehub backup DEST` (docs/backup.md)"


def check_backup(
    record: Path | None = None, max_age_h: float = 26.0, now: datetime | None = None
) -> CheckResult:
    """Warn when the last backup made here is older than ``max_age_h`` hours, gone, or missing.

    Parameters
    ----------
    record : pathlib.Path, optional
        The record ``coursehub backup`` writes (default
        :func:`coursehub.backup.record.record_path`: ``last-backup.json`` in the
        data directory).
    max_age_h : float
        Hours from which the last backup is too old (``COURSEHUB_DOCTOR_BACKUP_AGE_H``, 26:
        a daily backup and two hours).
    now : datetime, optional
        The time to compare with (aware; default: now, UTC).

    Returns
    -------
    CheckResult
        ``ok`` with the archive, its age and size; else ``warn`` saying what is wrong.
    """
    from coursehub.backup.record import read_record, record_path
    from coursehub.resources.units import describe_mem

    path = record or record_path()
    try:
        last = read_record(path)
    except (ValueError, TypeError, OSError) as exc:
        line = f"the record {path} of the last backup is unreadable ({exc}): {ADVICE}"
        return warn("backup", line)
    if last is None:
        return warn("backup", f"no backup was made on this host (no {path}): {ADVICE}")
    age_h = ((now or datetime.now(UTC)) - last.created_at).total_seconds() / 3600
    made = f"the last backup, {last.archive} of {last.created}"
    if not Path(last.archive).is_file():
        return warn("backup", f"{made}, is no longer there: {ADVICE}")
    if age_h > max_age_h:
        return warn("backup", f"{made}, is {age_h:.0f} h old, over {max_age_h:g} h: {ADVICE}")
    return ok("backup", f"{made}, is {age_h:.1f} h old ({describe_mem(last.size)})")
