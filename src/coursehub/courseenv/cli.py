"""``coursehub env set|build|show COURSE_ID``: a course's Python environment.

Imports nothing heavy at module level (``coursehub --help`` stays fast).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError


def register(subparsers: Any) -> None:
    """Add ``coursehub env`` and its sub-commands."""
    from coursehub.catalog.cli import add_database_url

    parser = subparsers.add_parser("env", help="course environments: declare, build, show")
    commands = parser.add_subparsers(dest="env_command", metavar="COMMAND", required=True)
    set_ = commands.add_parser("set", help="declare a course's requirements")
    source = set_.add_mutually_exclusive_group(required=True)
    source.add_argument("--requirements", type=Path, metavar="FILE", help="a requirements file")
    source.add_argument("--packages", nargs="+", metavar="REQ", help='e.g. "numpy>=1.26" pandas')
    build = commands.add_parser(
        "build",
        help="build the course's environment aside, then switch to it",
        description="python -m venv + pip (wheels only) in the sandbox (as the sandbox "
        "account when root), sealed read-only, then the course kernel; a failed build keeps "
        "the previous environment.",
    )
    show = commands.add_parser("show", help="print the environment's state")
    show.add_argument("--log", action="store_true", help="also print the last build's log")
    for sub, func in ((set_, run_set), (build, run_build), (show, run_show)):
        sub.add_argument("course_id", metavar="COURSE_ID")
        sub.add_argument(
            "--root", help="shared root (default: $COURSEHUB_SHARED_ROOT, else /srv/coursehub)"
        )
        add_database_url(sub)
        sub.set_defaults(func=func)


def _paths(args: argparse.Namespace) -> Any:
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.db import session_factory
    from coursehub.courseenv.layout import env_paths
    from coursehub.courselayout import check_shared_root, shared_root
    from coursehub.settings import check_course_id

    root = check_shared_root(args.root) if args.root else shared_root()
    course_id = check_course_id(args.course_id)
    with open_catalog(args.database_url) as engine, session_factory(engine)() as session:
        get_course(session, course_id)  # UsageError for a course not in the catalog
    return root, env_paths(root, course_id)


def run_set(args: argparse.Namespace) -> int:
    """Check and write the course's requirements (nothing written on a bad line)."""
    from coursehub.atomicfile import write_atomically
    from coursehub.courseenv.requirements import parse_requirements, render_requirements

    if args.requirements is not None:
        try:
            text = args.requirements.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read requirements {args.requirements}: {exc}") from None
        lines = parse_requirements(text, str(args.requirements))
    else:
        lines = parse_requirements("\n".join(args.packages), "--packages")
    _root, paths = _paths(args)
    paths.home.mkdir(mode=0o755, parents=True, exist_ok=True)
    write_atomically(paths.requirements, render_requirements(lines))
    print(f"{args.course_id}: {len(lines)} requirement(s) in {paths.requirements}")
    print(f"build it with: coursehub env build {args.course_id}")
    return 0


def run_build(args: argparse.Namespace) -> int:
    """Build the environment; print its size and time (or the error, exit status 2)."""
    from coursehub.courseenv.build import build_environment
    from coursehub.courseenv.requirements import material_requirements
    from coursehub.material.layout import MaterialLayout, material_root

    root, paths = _paths(args)
    material = None
    if not paths.requirements.is_file():  # no declared list: the material's requirements.txt
        material = material_requirements(MaterialLayout(material_root()), args.course_id)
    print(f"{args.course_id}: building in {paths.builds} (log in {paths.logs})", flush=True)
    state = build_environment(root, args.course_id, material=material)
    print(render_state(args.course_id, state))
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print the environment's state, and with ``--log`` the last build log."""
    from coursehub.courseenv.layout import read_log_tail, read_state

    _root, paths = _paths(args)
    state = read_state(paths)
    print(render_state(args.course_id, state))
    if args.log:
        print(read_log_tail(paths, state.get("log")) or "(no log)")
    return 0


def render_state(course_id: str, state: dict[str, Any]) -> str:
    """Return the state as a few lines (pure)."""
    status = state.get("status", "none")
    lines = [f"{course_id}: {status}"]
    if state.get("build"):
        size = state.get("size_bytes")
        size_text = f", {size / 2**20:.0f} MiB" if isinstance(size, int) else ""
        lines.append(f"  build {state['build']}{size_text}")
    if state.get("requirements_from"):
        lines.append(f"  requirements from {state['requirements_from']}")
    if state.get("duration_s") is not None and status == "ok":
        lines.append(f"  built in {state['duration_s']} s")
    if state.get("error"):
        lines.append(f"  error: {state['error']}")
    if status == "none":
        lines.append(f"  no build yet: coursehub env set {course_id} ..., then env build")
    return "\n".join(lines)
