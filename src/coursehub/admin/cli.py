"""``coursehub year|portal|course ...``: the catalog's administration, scriptable and idempotent.

Every command runs in one transaction (nothing half-written on an error) with
a hub admin's rights, like the rest of the command line. Creating what
already exists, the same way, succeeds and says so; ``--json`` prints what a
``list`` or ``show`` command finds as JSON. Nothing heavy is imported until a
command runs (``coursehub --help`` stays fast).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from coursehub.admin.budgetcli import BUDGET_HELP, add_budget_arguments, budget_work
from coursehub.catalog.cli import add_database_url


def _command(commands: Any, name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = commands.add_parser(name, help=help_text, description=help_text)
    add_database_url(sub)
    sub.set_defaults(func=func)
    return sub


def register_year(subparsers: Any) -> None:
    """Add ``coursehub year`` (create, list, rollover, archive) to ``subparsers``."""
    parser = subparsers.add_parser("year", help="academic years: create, list, roll over, archive")
    commands = parser.add_subparsers(dest="year_command", metavar="COMMAND", required=True)
    sub = _command(commands, "create", "add an academic year such as 2026-2027", run_year_create)
    sub.add_argument("label", metavar="YEAR", help="YYYY-YYYY, the second year the first + 1")
    sub.add_argument("--current", action="store_true", help="make it the current year")
    sub = _command(commands, "list", "list the academic years, newest first", run_year_list)
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub = _command(
        commands,
        "rollover",
        "copy every course of a year to another one (leads, groups, material, sources)",
        run_year_rollover,
    )
    sub.add_argument("from_year", metavar="FROM")
    sub.add_argument("--to", dest="to_year", metavar="TO", required=True)
    sub.add_argument("--portal", metavar="P", help="only the courses of portal P")
    sub.add_argument("--with-team", action="store_true", help="copy teachers and graders too")
    sub.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")
    sub = _command(
        commands,
        "archive",
        "archive a year: its courses become read-only and leave the hub at the next pruning sync",
        run_year_archive,
    )
    sub.add_argument("label", metavar="YEAR")
    sub.add_argument("--restore", action="store_true", help="restore an archived year")


def register_portal(subparsers: Any) -> None:
    """Add ``coursehub portal`` (create, list, rename, manager) to ``subparsers``."""
    parser = subparsers.add_parser("portal", help="discipline portals and their managers")
    commands = parser.add_subparsers(dest="portal_command", metavar="COMMAND", required=True)
    sub = _command(commands, "create", "add a portal (e.g. MECA)", run_portal_create)
    sub.add_argument("code", metavar="CODE")
    sub.add_argument("--title", default="", help="its title, e.g. Mécanique")
    sub.add_argument(
        "--manager", action="append", default=[], metavar="USER", help="a manager (repeatable)"
    )
    sub = _command(commands, "list", "list the portals and their managers", run_portal_list)
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub = _command(commands, "rename", "give a portal a new title", run_portal_rename)
    sub.add_argument("code", metavar="CODE")
    sub.add_argument("--title", required=True)
    manager = commands.add_parser("manager", help="add or remove a portal's managers")
    actions = manager.add_subparsers(dest="manager_command", metavar="ACTION", required=True)
    for name, text, remove in (
        ("add", "make USER a manager of CODE", False),
        ("remove", "USER stops managing", True),
    ):
        sub = _command(actions, name, text, partial(run_portal_manager, remove=remove))
        sub.add_argument("code", metavar="CODE")
        sub.add_argument("username", metavar="USER")


def register_course(subparsers: Any) -> None:
    """Add ``coursehub course`` (create, list, show, profile, archive, copy) to ``subparsers``."""
    parser = subparsers.add_parser("course", help="courses: create, list, show, archive, copy")
    commands = parser.add_subparsers(dest="course_command", metavar="COMMAND", required=True)
    sub = _command(commands, "create", "add a course; prints its course_id", run_course_create)
    sub.add_argument("code", metavar="CODE", help="the UE (APOGEE) code, e.g. MLMECA")
    sub.add_argument("--title", required=True)
    sub.add_argument("--year", required=True, metavar="YEAR")
    sub.add_argument("--portal", required=True, metavar="PORTAL")
    sub.add_argument("--lead", default="", metavar="USER", help="its lead, a known person")
    sub.add_argument("--profile", default="", metavar="NAME", help="its students' resource profile")
    sub.add_argument(
        "--team-profile",
        default="",
        metavar="NAME",
        help="its teaching team's resource profile (default: the students')",
    )
    sub.add_argument("--description", default="")
    sub = _command(commands, "list", "list courses, newest year first", run_course_list)
    sub.add_argument("--year", metavar="Y")
    sub.add_argument("--portal", metavar="P")
    sub.add_argument("--archived", action="store_true", help="include archived courses")
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub = _command(commands, "show", "show one course", run_course_show)
    sub.add_argument("course_id", metavar="COURSE_ID")
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub = _command(commands, "profile", "set a course's students' or team's profile", run_profile)
    sub.add_argument("course_id", metavar="COURSE_ID")
    for flag in ("--profile", "--team-profile"):
        sub.add_argument(flag, metavar="NAME", help="a profile's name; '' for none")
    sub = _command(commands, "budget", BUDGET_HELP, lambda a: _transaction(a, budget_work(a)))
    add_budget_arguments(sub)
    sub = _command(commands, "archive", "archive a course (read-only)", run_course_archive)
    sub.add_argument("course_id", metavar="COURSE_ID")
    sub.add_argument("--restore", action="store_true", help="restore an archived course")
    sub = _command(
        commands, "copy", "copy a course to another year; prints the new course_id", run_course_copy
    )
    sub.add_argument("course_id", metavar="COURSE_ID")
    sub.add_argument("--to-year", required=True, metavar="YEAR")
    sub.add_argument("--with-team", action="store_true", help="copy teachers and graders too")


@contextmanager
def _session(args: argparse.Namespace) -> Iterator[Any]:
    """Yield a session on the checked catalog (:func:`coursehub.catalog.connect.open_catalog`).

    The caller commits; the session is closed and the engine disposed of when the block ends.
    """
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_factory

    with open_catalog(args.database_url) as engine, session_factory(engine)() as session:
        yield session


def _transaction(args: argparse.Namespace, work: Any) -> int:
    """Run ``work(session)`` (which prints) in one transaction; roll back on any error."""
    with _session(args) as session:
        try:
            status = work(session)
            session.commit()
        except BaseException:
            session.rollback()
            raise
    return int(status or 0)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


# years ---------------------------------------------------------------------------------------


def run_year_create(args: argparse.Namespace) -> int:
    """Create a year (or find it), optionally the current one."""
    from coursehub.catalog.admin import ensure_year

    def work(session: Any) -> None:
        year, created = ensure_year(session, args.label, current=args.current)
        state = "created" if created else "exists"
        print(f"academic year {year.label} {state}{' (current)' if year.is_current else ''}")

    return _transaction(args, work)


def run_year_list(args: argparse.Namespace) -> int:
    """List the years with their state and number of courses."""
    from coursehub.admin.render import render_year
    from coursehub.catalog.courses import list_courses, list_years

    def work(session: Any) -> None:
        rows = [
            render_year(y, len(list_courses(session, year=y, include_archived=True)))
            for y in list_years(session)
        ]
        if args.json:
            _print_json(rows)
            return
        for row in rows:
            print(f"{row['label']}  {row['state']:<8}  {row['n_courses']} courses")

    return _transaction(args, work)


def run_year_archive(args: argparse.Namespace) -> int:
    """Archive or restore a year."""
    from coursehub.catalog.admin import archive_year
    from coursehub.catalog.courses import get_year

    def work(session: Any) -> None:
        year = archive_year(session, get_year(session, args.label), archived=not args.restore)
        if args.restore:
            print(f"academic year {year.label} restored")
        else:
            print(
                f"academic year {year.label} archived: its courses are read-only; "
                "`coursehub hub sync --prune` removes their hub groups"
            )

    return _transaction(args, work)


def run_year_rollover(args: argparse.Namespace) -> int:
    """Copy a year's courses to another year, with their sources (see ``carry_year``)."""
    from coursehub.admin.carry import carry_year
    from coursehub.catalog.rollover import render_steps

    with _session(args) as session:
        steps = carry_year(
            session,
            args.from_year,
            args.to_year,
            portal=args.portal,
            with_team=args.with_team,
            dry_run=args.dry_run,
        )
    print(render_steps([s for s, _ in steps], dry_run=args.dry_run), end="")
    print("dry run: nothing written" if args.dry_run else "run `coursehub hub sync` for the hub")
    return 0


# portals -------------------------------------------------------------------------------------


def run_portal_create(args: argparse.Namespace) -> int:
    """Create a portal (or find it) and add its managers."""
    from coursehub.catalog.admin import ensure_portal, render_managers

    def work(session: Any) -> None:
        portal, created = ensure_portal(session, args.code, args.title, args.manager)
        state = "created" if created else "exists"
        print(f"portal {portal.code} {state}: {portal.name}; managers: {render_managers(portal)}")

    return _transaction(args, work)


def run_portal_list(args: argparse.Namespace) -> int:
    """List the portals and their managers."""
    from coursehub.admin.render import render_portal
    from coursehub.catalog.courses import list_portals

    def work(session: Any) -> None:
        rows = [render_portal(p) for p in list_portals(session)]
        if args.json:
            _print_json(rows)
            return
        for row in rows:
            managers = ", ".join(row["managers"]) or "-"
            print(f"{row['code']:<10} {row['title']}  managers: {managers}")

    return _transaction(args, work)


def run_portal_rename(args: argparse.Namespace) -> int:
    """Give a portal a new title."""
    from coursehub.catalog.admin import rename_portal
    from coursehub.catalog.courses import get_portal

    def work(session: Any) -> None:
        portal = rename_portal(session, get_portal(session, args.code), args.title)
        print(f"portal {portal.code} is now {portal.name}")

    return _transaction(args, work)


def run_portal_manager(args: argparse.Namespace, remove: bool = False) -> int:
    """Add a portal manager, a known person (``remove``: remove one); print the managers."""
    from coursehub.catalog.admin import appoint_manager, remove_manager, render_managers
    from coursehub.catalog.courses import get_portal

    def work(session: Any) -> None:
        portal = get_portal(session, args.code)
        (remove_manager if remove else appoint_manager)(session, portal, args.username)
        print(f"portal {portal.code} managers: {render_managers(portal)}")

    return _transaction(args, work)


# courses -------------------------------------------------------------------------------------


def run_course_create(args: argparse.Namespace) -> int:
    """Create a course and print its course_id; the same course again prints it too."""
    from sqlalchemy import select

    from coursehub.admin.render import same_course
    from coursehub.catalog.admin import open_course
    from coursehub.catalog.courses import make_course_id, parse_year_label
    from coursehub.catalog.models.courses import Course

    def work(session: Any) -> None:
        course_id = make_course_id(args.code, parse_year_label(args.year))
        existing = session.scalar(select(Course).where(Course.course_id == course_id))
        if existing is not None and same_course(session, existing, args):
            print(existing.course_id)
            return
        course = open_course(
            session,
            args.code,
            args.title,
            args.year,
            args.portal,
            lead=args.lead,
            profile=args.profile,
            team_profile=args.team_profile,
            description=args.description,
        )
        print(course.course_id)

    return _transaction(args, work)


def run_course_list(args: argparse.Namespace) -> int:
    """List courses, filtered by year and portal."""
    from coursehub.admin.render import render_course_row
    from coursehub.catalog.courses import get_portal, get_year, list_courses

    def work(session: Any) -> None:
        year = get_year(session, args.year) if args.year else None
        portal = get_portal(session, args.portal) if args.portal else None
        courses = list_courses(session, year, portal, include_archived=args.archived)
        rows = [render_course_row(session, c) for c in courses]
        if args.json:
            _print_json(rows)
            return
        for row in rows:
            flag = "  (archived)" if row["archived"] else ""
            print(f"{row['course_id']:<24} {row['portal']:<8} {row['title']}{flag}")

    return _transaction(args, work)


def run_course_show(args: argparse.Namespace) -> int:
    """Show a course: year, portal, profile, leads, groups, material, counts."""
    from coursehub.admin.render import render_course_row
    from coursehub.catalog.courses import get_course

    def work(session: Any) -> None:
        row = render_course_row(session, get_course(session, args.course_id))
        if args.json:
            _print_json(row)
            return
        for key, value in row.items():
            shown = ", ".join(value) if isinstance(value, list) else value
            print(f"{key:<14} {'' if shown is None else shown}")

    return _transaction(args, work)


def run_profile(args: argparse.Namespace) -> int:
    """Set a course's students' and/or team's profile ('' clears: the team then gets the
    students', the students the hub's defaults); print both."""
    from coursehub.catalog.courses import get_course, update_course
    from coursehub.catalog.profiles import get_profile

    def work(session: Any) -> None:
        course = get_course(session, args.course_id)
        changes = {
            field: get_profile(session, name) if name.strip() else None
            for field, name in (("profile", args.profile), ("team_profile", args.team_profile))
            if name is not None
        }
        update_course(session, course, **changes)
        names = [p.name if p else "-" for p in (course.profile, course.team_profile)]
        print(f"course {course.course_id}: profile {names[0]}, team profile {names[1]}")

    return _transaction(args, work)


def run_course_archive(args: argparse.Namespace) -> int:
    """Archive or restore a course."""
    from coursehub.catalog.admin import archive_course
    from coursehub.catalog.courses import get_course

    def work(session: Any) -> None:
        course = archive_course(session, get_course(session, args.course_id), not args.restore)
        print(f"course {course.course_id} {'archived' if course.archived else 'restored'}")

    return _transaction(args, work)


def run_course_copy(args: argparse.Namespace) -> int:
    """Copy a course to another year with its sources; print the new course_id."""
    from coursehub.admin.carry import carry_course

    with _session(args) as session:
        course = carry_course(session, args.course_id, args.to_year, with_team=args.with_team)
        print(course.course_id)
    return 0
