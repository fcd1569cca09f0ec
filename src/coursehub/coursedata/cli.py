"""``coursehub data ensure [COURSE_ID]``: make or refresh the courses' shared data folders.

Imports nothing heavy at module level (``coursehub --help`` stays fast).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``coursehub data`` and its sub-command ``ensure``."""
    from coursehub.catalog.cli import add_database_url

    parser = subparsers.add_parser("data", help="shared course data folders (team writes)")
    commands = parser.add_subparsers(dest="data_command", metavar="COMMAND", required=True)
    ensure = commands.add_parser(
        "ensure",
        help="make or refresh the data folders and their Unix groups from the catalog",
        description="For each course (or COURSE_ID): Unix groups cht-<course_id> (team) and "
        "chs-<course_id> (students) from the roster, and <root>/courses/<course_id>/data "
        "(team writes, students read, others nothing; POSIX ACLs). Needs root. Idempotent.",
    )
    ensure.add_argument("course_id", nargs="?", metavar="COURSE_ID", help="one course only")
    ensure.add_argument(
        "--root", help="shared root (default: $COURSEHUB_SHARED_ROOT, else /srv/coursehub)"
    )
    ensure.add_argument(
        "--recursive",
        action="store_true",
        help="also reset the permissions of everything inside (files moved in with mv)",
    )
    add_database_url(ensure)
    ensure.set_defaults(func=run_ensure)


def run_ensure(args: argparse.Namespace) -> int:
    """Run ``coursehub data ensure``; exit status 1 if a course failed."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_factory
    from coursehub.coursedata.ensure import ensure_data, render_outcomes
    from coursehub.courselayout import check_shared_root, shared_root
    from coursehub.settings import check_course_id

    root = check_shared_root(args.root) if args.root else shared_root()
    course_ids = [check_course_id(args.course_id)] if args.course_id else None
    with open_catalog(args.database_url) as engine, session_factory(engine)() as session:
        outcomes = ensure_data(session, root, course_ids, recursive=args.recursive)
    print(render_outcomes(outcomes))
    return 1 if any(o.error for o in outcomes) else 0
