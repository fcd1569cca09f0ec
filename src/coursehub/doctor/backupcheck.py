"""The ``backup`` check: how old this host's last backup is (docs/backup.md, docs/doctor.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from coursehub.doctor.result import CheckResult, ok, warn

#: What to run, for the lines of a warning.
ADVICE = "run `coursehub backup DEST` (docs/backup.md)"
#: Parts without which a backup gives back no courses or no hub (coursehub.backup.sources).
ESSENTIAL = ("catalog", "hub/jupyterhub.sqlite")
#: Secrets without which a restored hub signs every user out or loses the course app.
HUB_SECRETS = ("hub/cookie-secret", "deploy/secrets.env")


def skipped_warning(parts: tuple[str, ...], skipped: tuple[str, ...]) -> str:
    """Return why a backup that skipped ``skipped`` is not enough ("" when it is; pure).

    A backup is not enough when it skipped the catalog or the hub's database
    (:data:`ESSENTIAL`), a secret of a hub whose database it holds
    (:data:`HUB_SECRETS`), or more parts than it holds.
    """
    missing = [name for name in ESSENTIAL if name in skipped]
    if "hub/jupyterhub.sqlite" in parts:
        missing += [name for name in HUB_SECRETS if name in skipped]
    if not missing and len(skipped) <= len(parts):
        return ""
    return f"skipped {len(skipped)} of {len(parts) + len(skipped)} parts: {', '.join(skipped)}"


def check_backup(
    record: Path | None = None,
    max_age_h: float = 26.0,
    now: datetime | None = None,
    database_url: str | None = None,
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
    database_url : str, optional
        The catalog whose record to read when ``record`` is not given
        (:func:`coursehub.backup.record.record_path`).

    Returns
    -------
    CheckResult
        ``ok`` with the archive, its age and size (and the parts it skipped);
        else ``warn`` saying what is wrong: too old, gone, or it skipped the
        catalog, the hub's database or most of its parts (:func:`skipped_warning`).
    """
    from coursehub.backup.record import read_record, record_path
    from coursehub.resources.units import describe_mem

    path = record or record_path(database_url=database_url)
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
    short = skipped_warning(last.parts, last.skipped)
    if short:
        return warn("backup", f"{made} {short}: set their places, then {ADVICE}")
    skipped = f"; skipped, not here: {', '.join(last.skipped)}" if last.skipped else ""
    return ok("backup", f"{made}, is {age_h:.1f} h old ({describe_mem(last.size)}{skipped})")
