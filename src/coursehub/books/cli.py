"""``coursehub book build|show|settings``: a course's book from the host's command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``coursehub book`` and its sub-commands."""
    parser = subparsers.add_parser(
        "book",
        help="build and show a course's Jupyter Book (docs/books.md)",
        description="A course's book: built from its material with Jupyter Book, "
        "served by the course app at /courses/COURSE_ID/book/.",
    )
    parser.add_argument(
        "--books-dir",
        type=Path,
        help="books folder (default $COURSEHUB_BOOKS_DIR or DATA_DIR/books)",
    )
    sub = parser.add_subparsers(dest="book_command", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="build the book now (a runner job; waits for it)")
    build.add_argument("course_id")
    build.add_argument("-v", "--verbose", action="store_true", help="print jupyter-book's output")
    build.set_defaults(func=run_build)
    show = sub.add_parser("show", help="the book's settings and last build, as JSON")
    show.add_argument("course_id")
    show.set_defaults(func=run_show)
    settings = sub.add_parser("settings", help="change the book's settings (host administrators)")
    settings.add_argument("course_id")
    settings.add_argument("--folder", help="the book's folder in the material ('' for its top)")
    settings.add_argument(
        "--source-dir",
        help="build from this host folder while the course has no published material",
    )
    settings.add_argument(
        "--execute", choices=("on", "off"), help="run the notebooks when building"
    )
    settings.add_argument("--public", choices=("on", "off"), help="serve the book to anyone")
    settings.add_argument(
        "--build-on-update",
        choices=("on", "off"),
        help="build again after each material update that brings a new commit",
    )
    settings.add_argument("--timeout", help="limit of one build, e.g. 10m")
    settings.add_argument("--mem", help="memory limit of one build, e.g. 2G")
    settings.set_defaults(func=run_settings)


def _paths(args: argparse.Namespace) -> Any:
    from coursehub.books.settings import BookPaths, books_root

    return BookPaths(args.books_dir or books_root(), args.course_id)


def run_build(args: argparse.Namespace) -> int:
    """Build the book; print the outcome; exit 1 (with the reason on stderr) if it failed."""
    import os

    from coursehub.books.build import build_book

    shared = os.environ.get("COURSEHUB_SHARED_ROOT")
    outcome = build_book(
        _paths(args),
        shared_root=Path(shared) if shared else None,
        on_output=(lambda text: print(text, end="", flush=True)) if args.verbose else None,
    )
    if not outcome.ok:
        print(f"coursehub: error: {outcome.message} (log: {outcome.log_path})", file=sys.stderr)
        return 1
    print(f"{outcome.message} (build {outcome.build_id}; log: {outcome.log_path})")
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print the settings and the last build's state."""
    from dataclasses import asdict

    from coursehub.books.build import is_building
    from coursehub.books.plan import plan_view
    from coursehub.books.settings import read_settings, read_state
    from coursehub.resources.processes import pid_running  # psutil: not at start-up

    paths = _paths(args)
    recorded = read_state(paths)
    state = plan_view(recorded, is_building(paths), pid_running(recorded.get("pid")))
    print(json.dumps({"settings": asdict(read_settings(paths)), "build": state}, indent=2))
    return 0


def run_settings(args: argparse.Namespace) -> int:
    """Change the given settings, keep the others; print them."""
    from dataclasses import asdict, replace

    from coursehub.books.settings import parse_settings, read_settings, write_settings
    from coursehub.resources.units import parse_duration

    paths = _paths(args)
    changes: dict[str, Any] = {}
    if args.folder is not None:
        changes["folder"] = args.folder
    if args.source_dir is not None:
        changes["source_dir"] = str(Path(args.source_dir).resolve()) if args.source_dir else ""
    if args.execute is not None:
        changes["execute"] = args.execute == "on"
    if args.public is not None:
        changes["public"] = args.public == "on"
    if args.build_on_update is not None:
        changes["build_on_update"] = args.build_on_update == "on"
    if args.timeout is not None:
        changes["timeout_s"] = float(parse_duration(args.timeout))
    if args.mem is not None:
        changes["mem_limit"] = args.mem
    settings = parse_settings(asdict(replace(read_settings(paths), **changes)), "the options")
    write_settings(paths, settings)
    print(json.dumps(asdict(settings), indent=2))
    return 0
