"""``coursehub usage``: read the usage files into the catalog, report, apply the retention."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError

#: Where ``ingest`` and ``prune`` look when no folder is given: ``$COURSEHUB_USAGE_DIR``.
FOLDER_HELP = "the usage folder (default: $COURSEHUB_USAGE_DIR)"


def register(subparsers: Any) -> None:
    """Add ``coursehub usage ingest|report|prune`` to ``subparsers``."""
    parser = subparsers.add_parser("usage", help="usage accounting: ingest, report, retention")
    commands = parser.add_subparsers(dest="usage_command", metavar="COMMAND", required=True)
    ingest = commands.add_parser("ingest", help="read the hub's and runner's usage files")
    ingest.add_argument("folder", metavar="FOLDER", nargs="?", type=Path, help=FOLDER_HELP)
    ingest.add_argument("--cpus", type=float, help="CPUs of the hub's host (default: this host's)")
    ingest.add_argument("--memory", help="memory of the hub's host, e.g. 512G (default: here)")
    ingest.add_argument("--gpus", type=int, help="GPUs of the hub's host (default: this host's)")
    ingest.add_argument(
        "--gpu-memory", help="memory of all the hub host's GPUs, e.g. 320G (default: this host's)"
    )
    ingest.add_argument(
        "--every",
        metavar="S",
        type=float,
        help="read again every S seconds until stopped (the hub's usage-ingest service)",
    )
    report = commands.add_parser("report", help="CPU-hours, GPU-hours and peak memory")
    report.add_argument("course", metavar="COURSE_ID", nargs="?", help="only this course")
    report.add_argument("--since", metavar="DATE", help="only from this day on (YYYY-MM-DD)")
    report.add_argument("--by", choices=("student", "day", "course"), default="student")
    output = report.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON")
    output.add_argument("--csv", action="store_true", help="print CSV")
    prune = commands.add_parser("prune", help="apply the retention (docs/usage.md)")
    prune.add_argument("folder", metavar="FOLDER", nargs="?", type=Path, help=FOLDER_HELP)
    for sub, func in ((ingest, run_ingest), (report, run_report), (prune, run_prune)):
        sub.add_argument("--database-url", help="SQLAlchemy URL of the catalog")
        sub.set_defaults(func=func)


def _folder(args: argparse.Namespace, make: bool = False) -> Path:
    """Return FOLDER, else ``$COURSEHUB_USAGE_DIR``; with ``make``, made owner-only if absent."""
    from coursehub.filemodes import ensure_private_dir
    from coursehub.meter.sampler import usage_folder

    folder = args.folder or usage_folder()
    if folder is None:
        raise UsageError("no usage folder: give FOLDER or set COURSEHUB_USAGE_DIR")
    if make and not Path(folder).exists():
        ensure_private_dir(Path(folder))
    if not Path(folder).is_dir():
        raise UsageError(f"usage folder {folder} does not exist")
    return Path(folder)


@contextmanager
def _session(args: argparse.Namespace) -> Iterator[Any]:
    """Yield a session on the checked catalog, committed when the block ends."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope

    with open_catalog(args.database_url) as engine, session_scope(engine) as session:
        yield session


def _limits(args: argparse.Namespace) -> Any:
    from coursehub.meter.bounds import host_limits
    from coursehub.resources.units import parse_mem

    cpus, gpus = getattr(args, "cpus", None), getattr(args, "gpus", None)
    if cpus is not None and not cpus > 0:
        raise UsageError(f"--cpus must be more than 0, got {cpus:g}")
    if gpus is not None and gpus < 0:
        raise UsageError(f"--gpus must not be negative, got {gpus}")
    memory, gpu_memory = getattr(args, "memory", None), getattr(args, "gpu_memory", None)
    return host_limits(
        cpus=cpus,
        mem_bytes=parse_mem(memory) if memory else None,
        gpus=gpus,
        gpu_mem_bytes=parse_mem(gpu_memory) if gpu_memory else None,
    )


def run_ingest(args: argparse.Namespace) -> int:
    """Apply what was appended to the usage files; print counts and refused lines.

    The hub's folder first, then its jobs folder (``FOLDER-jobs``), whose
    files are all read as written by their owners. With ``--every S``: again
    every S seconds until SIGTERM (:mod:`coursehub.usage.ingestloop`); the
    folder is made (owner-only) if the hub has not made it yet. Either way
    only one ingest of a folder runs at a time (:func:`ingest_lock`).
    """
    from coursehub.usage.ingestloop import ingest_lock, run_every, stop_on_sigterm

    every = args.every
    if every is not None and not every > 0:
        raise UsageError(f"--every must be more than 0 seconds, got {every:g}")
    folder = _folder(args, make=every is not None)
    limits = _limits(args)
    with ingest_lock(folder):
        if every is None:
            _print_outcome(_ingest_pass(args, folder, limits), folder, quiet=False)
            return 0
        print(f"reading usage from {folder} every {every:g} s", flush=True)
        with stop_on_sigterm() as stop:
            run_every(
                every,
                lambda: _ingest_pass(args, folder, limits),
                lambda outcome: _print_outcome(outcome, folder, quiet=True),
                lambda line: print(line, file=sys.stderr, flush=True),
                stop,
            )
    return 0


def _ingest_pass(args: argparse.Namespace, folder: Path, limits: Any) -> Any:
    from coursehub.catalog.usage.ingest import ingest_hub

    with _session(args) as session:
        try:
            return ingest_hub(session, folder, limits)
        except OSError as exc:
            raise UsageError(f"reading the usage folder {folder}: {exc}") from exc


def _print_outcome(outcome: Any, folder: Path, quiet: bool) -> None:
    """Print the refused lines, then the count (``quiet``: nothing for a pass that read nothing)."""
    for problem in outcome.refused:
        print(f"refused: {problem}", file=sys.stderr, flush=True)
    if outcome.records or not quiet:
        print(f"{outcome.records} usage records read from {folder}", flush=True)


def run_report(args: argparse.Namespace) -> int:
    """Print the report as a table, CSV or JSON."""
    from coursehub.usage.report import (
        parse_since,
        render_csv,
        render_json,
        render_table,
        usage_report,
    )

    since = parse_since(args.since)
    with _session(args) as session:
        rows = usage_report(session, args.course, since, args.by)
    render = render_json if args.json else render_csv if args.csv else render_table
    sys.stdout.write(render(rows, args.by))
    return 0


def run_prune(args: argparse.Namespace) -> int:
    """Delete what the retention no longer keeps."""
    from coursehub.catalog.usage.ingest import prune_usage

    folder = args.folder or None
    if folder is not None and not folder.is_dir():
        raise UsageError(f"usage folder {folder} does not exist")
    with _session(args) as session:
        removed = prune_usage(session, folder)
    print(f"{removed} usage rows and files removed")
    return 0
