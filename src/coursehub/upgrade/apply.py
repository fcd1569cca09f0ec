"""Carry out an upgrade plan, one step after another; a failed step stops it, saying what to do.

Nothing is half-done without being said: a failed backup changes nothing; a
failed migration stops before any file is written or unit restarted, and names
the backup to restore the catalog from; a failed write or restart names the
step, and a second ``coursehub upgrade`` finishes it (every step is idempotent).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from coursehub.deploy.install import apply_plan
from coursehub.errors import CoursehubError
from coursehub.upgrade.plan import UpgradePlan

#: Runs ``systemctl`` with these arguments; raises :class:`UpgradeError` when it fails.
Systemctl = Callable[[Sequence[str]], None]


class UpgradeError(CoursehubError):
    """A step of the upgrade failed: the message names it, what was done and how to recover."""


def run_systemctl(args: Sequence[str]) -> None:
    """Run ``systemctl ARGS`` (systemctl(1)).

    Raises
    ------
    UpgradeError
        If ``systemctl`` is missing or exits non-zero (its last line of output).
    """
    try:
        subprocess.run(["systemctl", *args], check=True, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise UpgradeError("systemctl is not installed: is systemd this host's init?") from exc
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or exc.stdout or "").strip().splitlines()
        last = lines[-1] if lines else f"exit status {exc.returncode}"
        raise UpgradeError(f"systemctl {' '.join(args)} failed: {last}") from exc


def back_up(plan: UpgradePlan) -> str:
    """Step 1: write the backup and its record; return the line that says so.

    Raises
    ------
    UpgradeError
        If the backup cannot be written (nothing was changed).
    """
    from coursehub import __version__
    from coursehub.backup.archive import write_backup
    from coursehub.backup.record import BackupRecord, record_path, write_record
    from coursehub.backup.sources import find_sources

    hub_dir = plan.options.layout.on_disk(plan.options.layout.hub_dir)
    try:
        sources = find_sources(plan.environ, database_url=plan.database_url, hub_dir=hub_dir)
        summary = write_backup(sources, plan.archive, version=__version__)
        created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        parts = tuple(part.name for part in summary.parts)
        skipped = tuple(name for name, _ in summary.skipped)
        record = BackupRecord(
            str(plan.archive), created, summary.size, summary.files, parts, skipped
        )
        write_record(record, record_path(plan.environ, plan.database_url))
    except (CoursehubError, OSError) as exc:
        raise UpgradeError(f"step 1, backup, failed: {exc}; nothing was changed") from exc
    said = f", skipped {', '.join(skipped)}" if skipped else ""
    return f"backed up into {plan.archive} ({summary.files} files{said})"


def migrate(plan: UpgradePlan) -> str:
    """Step 2: migrate the catalog; return the line that says so.

    Raises
    ------
    UpgradeError
        If the migration fails: no file was rewritten and no unit restarted;
        the message names the backup to restore the catalog from.
    """
    from coursehub.deploy.host import migrate as migrate_catalog

    if plan.migrate_from == plan.migrate_to:
        return f"the catalog is at revision {plan.migrate_to}"
    try:
        revision = migrate_catalog(plan.database_url)
    except Exception as exc:
        raise UpgradeError(
            f"step 2, migration from {plan.migrate_from or '(empty)'} to {plan.migrate_to}, "
            f"failed: {exc}. Stopped there: no file was rewritten and nothing restarted. "
            f"The backup made before it is {plan.archive}: "
            f"`coursehub restore {plan.archive} --force` puts the catalog back as it was"
        ) from exc
    return f"migrated the catalog from {plan.migrate_from or '(empty)'} to {revision}"


def rewrite(plan: UpgradePlan, hostname: str) -> str:
    """Step 3: write the re-rendered files; return the line that says so.

    Raises
    ------
    UpgradeError
        If a file cannot be written (the catalog is migrated; nothing restarted).
    """
    try:
        apply_plan(plan.options, plan.deploy, hostname)
    except (CoursehubError, OSError) as exc:
        raise UpgradeError(
            f"step 3, writing the install's files, failed: {exc}. The catalog is migrated, "
            "nothing was restarted: fix it and run `coursehub upgrade` again"
        ) from exc
    return f"wrote {len(plan.deploy.files) + len(plan.deploy.folders)} changed files and folders"


def restart(plan: UpgradePlan, systemctl: Systemctl) -> list[str]:
    """Step 4: reload the unit files if one changed, restart the units; return the lines.

    Raises
    ------
    UpgradeError
        If ``systemctl`` fails; the message names the unit and its journal.
    """
    lines = []
    if plan.restart and plan.reload_units:
        systemctl(["daemon-reload"])
        lines.append("reloaded the unit files")
    for unit in plan.restart:
        try:
            systemctl(["try-restart", unit])
        except UpgradeError as exc:
            raise UpgradeError(
                f"step 4, restart of {unit}, failed: {exc}. The catalog is migrated and the "
                f"files written; see `journalctl -u {unit}`, then `systemctl restart {unit}`"
            ) from exc
        lines.append(f"restarted {unit} (if it was running)")
    return lines


def apply_upgrade(
    plan: UpgradePlan, hostname: str, systemctl: Systemctl = run_systemctl
) -> list[str]:
    """Carry out ``plan``'s four steps in order; return one line per step done.

    Raises
    ------
    UpgradeError
        At the first step that fails (see :func:`back_up`, :func:`migrate`,
        :func:`rewrite`, :func:`restart`); the steps after it are not run.
    """
    lines = [back_up(plan), migrate(plan), rewrite(plan, hostname)]
    return lines + restart(plan, systemctl)
