"""``coursehub backup DEST`` and ``coursehub restore ARCHIVE`` (docs/backup.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HUB_DIR_HELP = (
    "the hub's data folder, its jupyterhub.sqlite (default: /var/lib/coursehub/hub where "
    "coursehub deploy installed the hub, else /srv/jupyterhub)"
)
USAGE_HELP = "the usage records' folder (default: $COURSEHUB_USAGE_DIR; unset: none)"


def _place_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", help="SQLAlchemy URL of the catalog")
    parser.add_argument("--hub-dir", type=Path, help=HUB_DIR_HELP)
    parser.add_argument("--usage-dir", type=Path, help=USAGE_HELP)


def register_backup(subparsers: Any) -> None:
    """Add ``coursehub backup`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "backup",
        help="back up the catalog, hub, grading, material, LTI key and usage into one archive",
    )
    parser.add_argument(
        "dest",
        metavar="DEST",
        type=Path,
        help="a folder (the archive gets a dated name) or a new file ending in .tar.gz or .tar",
    )
    _place_options(parser)
    parser.set_defaults(func=run_backup)


def register_restore(subparsers: Any) -> None:
    """Add ``coursehub restore`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "restore", help="check a backup, then put every part of it back, all or nothing"
    )
    parser.add_argument("archive", metavar="ARCHIVE", type=Path, help="from coursehub backup")
    parser.add_argument(
        "--force", action="store_true", help="replace parts that are not empty here"
    )
    parser.add_argument(
        "--check", action="store_true", help="only check the archive; write nothing"
    )
    _place_options(parser)
    parser.set_defaults(func=run_restore)


def _sources(args: argparse.Namespace) -> Any:
    from coursehub.backup.sources import find_sources

    return find_sources(
        database_url=args.database_url, hub_dir=args.hub_dir, usage_dir=args.usage_dir
    )


def run_backup(args: argparse.Namespace) -> int:
    """Write the archive, record it, print what it holds."""
    from datetime import UTC, datetime

    from coursehub import __version__
    from coursehub.backup.archive import default_archive_name, write_backup
    from coursehub.backup.record import BackupRecord, record_path, write_record
    from coursehub.resources.units import describe_mem

    dest: Path = args.dest
    target = dest / default_archive_name(datetime.now(UTC)) if dest.is_dir() else dest
    summary = write_backup(_sources(args), target, version=__version__)
    for part in summary.parts:
        print(f"backed up {part.name}{f' ({part.backend})' if part.backend else ''}: {part.where}")
    for name, reason in summary.skipped:
        print(f"skipped {name}: {reason}")
    print(
        f"wrote {summary.path}: {summary.files} files, {describe_mem(summary.data_bytes)} "
        f"in {describe_mem(summary.size)}, {summary.seconds:.1f} s"
    )
    created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    record = BackupRecord(
        str(summary.path.resolve()),
        created,
        summary.size,
        summary.files,
        tuple(part.name for part in summary.parts),
        tuple(name for name, _ in summary.skipped),
    )
    write_record(record, record_path(database_url=args.database_url))
    return 0


def run_restore(args: argparse.Namespace) -> int:
    """Check the archive; unless ``--check``, restore it; print what was done."""
    from coursehub.backup.restore import restore_backup
    from coursehub.backup.verify import verify_archive

    if args.check:
        manifest = verify_archive(args.archive)
        files = sum(1 for e in manifest.entries if e.type == "file")
        print(
            f"{args.archive}: sound, {files} files of {len(manifest.parts)} parts, "
            f"made {manifest.created} on {manifest.host} by coursehub {manifest.coursehub_version}"
        )
        return 0
    summary = restore_backup(args.archive, _sources(args), force=args.force)
    for name, where in summary.restored:
        print(f"restored {name}: {where}")
    print(
        f"restored {summary.files} files from the backup of {summary.created} "
        f"in {summary.seconds:.1f} s"
    )
    return 0
