"""``coursehub db ...`` and ``coursehub roster ...``: the catalog's database and rosters.

Nothing heavy is imported at module level: SQLAlchemy and Alembic load only
when a sub-command runs, so ``coursehub --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError


def add_database_url(parser: argparse.ArgumentParser) -> None:
    """Add ``--database-url`` (default: ``$COURSEHUB_DATABASE_URL`` or the data directory's)."""
    parser.add_argument(
        "--database-url",
        help="SQLAlchemy URL of the catalog (default: $COURSEHUB_DATABASE_URL, else a SQLite "
        "file in $COURSEHUB_DATA_DIR, default ~/.local/share/coursehub)",
    )


def register_db(subparsers: Any) -> None:
    """Add ``coursehub db`` (upgrade, current, seed) to ``subparsers``."""
    parser = subparsers.add_parser("db", help="create, migrate and inspect the catalog database")
    commands = parser.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    upgrade = commands.add_parser("upgrade", help="migrate the catalog to the newest schema")
    current = commands.add_parser("current", help="show the catalog's schema revision")
    seed = commands.add_parser("seed", help="add the demo year, portal, course and students")
    for sub, func in ((upgrade, run_upgrade), (current, run_current), (seed, run_seed)):
        add_database_url(sub)
        sub.set_defaults(func=func)


def register_roster(subparsers: Any) -> None:
    """Add ``coursehub roster import`` to ``subparsers``."""
    parser = subparsers.add_parser("roster", help="import a course's student list (CSV)")
    commands = parser.add_subparsers(dest="roster_command", metavar="COMMAND", required=True)
    sub = commands.add_parser(
        "import",
        help="import a roster CSV into a course",
        description="Import a roster CSV (comma or semicolon separated, UTF-8 or Windows-1252, "
        "French or English headers) into a course, in one transaction.",
    )
    sub.add_argument("course", metavar="COURSE", help="the course's course_id, e.g. mlmeca-2025")
    sub.add_argument("file", metavar="FILE", type=Path, help="the CSV file")
    sub.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")
    sub.add_argument(
        "--yes",
        action="store_true",
        help="apply the changes to existing people's names, e-mails or student numbers "
        "(the '~ row' lines of --dry-run); without it such an import writes nothing",
    )
    sub.add_argument(
        "--mode",
        choices=("add", "sync"),
        default="add",
        help="add: add and update students (default); sync: also remove the course's students "
        "(of --group, if given) missing from the file",
    )
    sub.add_argument("--group", metavar="G", help="put every student of the file in group G")
    sub.add_argument(
        "--username-from",
        choices=("student_id", "email-local"),
        default="student_id",
        help="hub username: the student number (default) or the part of the e-mail before '@'; "
        "either way lower case and stripped, as the hub normalises usernames",
    )
    add_database_url(sub)
    sub.set_defaults(func=run_roster_import)


def run_upgrade(args: argparse.Namespace) -> int:
    """Migrate the catalog database to the newest revision and print it."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.schema import current_revision, upgrade_database

    with open_catalog(args.database_url, check_schema=False) as engine:
        upgrade_database(engine)
        print(f"catalog database at revision {current_revision(engine)}")
    return 0


def run_current(args: argparse.Namespace) -> int:
    """Print the database's revision and whether it is the newest; 1 if it needs an upgrade."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.schema import current_revision, head_revision

    with open_catalog(args.database_url, check_schema=False) as engine:
        current, head = current_revision(engine), head_revision()
    state = "up to date" if current == head else f"needs `coursehub db upgrade` to {head}"
    print(f"catalog database at revision {current or '(empty)'}: {state}")
    return 0 if current == head else 1


def run_seed(args: argparse.Namespace) -> int:
    """Fill an empty, migrated catalog with the demo data."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.catalog.readmodel import count_members
    from coursehub.catalog.seed import seed_demo

    with open_catalog(args.database_url) as engine, session_scope(engine) as session:
        course = seed_demo(session)
        print(f"seeded course {course.course_id} with {count_members(session, course)} members")
    return 0


def run_roster_import(args: argparse.Namespace) -> int:
    """Read and plan a roster, print the plan, then (unless ``--dry-run``) apply it.

    The command line has a hub admin's rights: it may change anyone's
    identity, once confirmed with ``--yes``.
    """
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_factory
    from coursehub.catalog.errors import IdentityError, RosterError
    from coursehub.catalog.roster.apply import apply_roster, check_confirmed, import_roster
    from coursehub.catalog.roster.preview import render_plan

    try:
        data = args.file.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read roster {args.file}: {exc.strerror}") from None
    with open_catalog(args.database_url) as engine, session_factory(engine)() as session:
        try:
            plan = import_roster(
                session,
                args.course,
                data,
                mode=args.mode,
                group=args.group,
                username_rule=args.username_from,
                dry_run=True,
                admin=True,
            )
        except RosterError as exc:
            raise RosterError(exc.problems, source=str(args.file)) from None
        sys.stdout.write(render_plan(plan))
        if args.dry_run:
            print("dry run: nothing written")
            return 0
        try:
            check_confirmed(plan, args.yes)
        except IdentityError as exc:
            raise IdentityError(f"{exc}: re-run with --yes") from None
        apply_roster(session, plan)
    print("applied")
    return 0
