"""``coursehub home``: home quotas in the catalog, applied to the homes; the backend of a home."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError

SIZE_HELP = "a size such as 2G or 500M, or 'none' (no quota of its own)"


def register(subparsers: Any) -> None:
    """Add ``coursehub home quota|plan|apply|detect`` to ``subparsers``."""
    parser = subparsers.add_parser("home", help="students' home quotas (docs/homes.md)")
    commands = parser.add_subparsers(dest="home_command", metavar="COMMAND", required=True)
    quota = commands.add_parser(
        "quota", help="set the home quota of a course's or portal's students"
    )
    target = quota.add_mutually_exclusive_group(required=True)
    target.add_argument("--course", metavar="COURSE_ID")
    target.add_argument("--portal", metavar="CODE")
    quota.add_argument("size", metavar="SIZE", help=SIZE_HELP)
    plan = commands.add_parser("plan", help="print each student's quota from the catalog")
    apply = commands.add_parser("apply", help="set each student's quota on their home")
    apply.add_argument("root", metavar="HOMES", type=Path, help="the folder of homes (HOMES/USER)")
    apply.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    for sub in (plan, apply):
        sub.add_argument(
            "--default", metavar="SIZE", help="department default ($COURSEHUB_HOME_QUOTA)"
        )
    detect = commands.add_parser("detect", help="say which quota a home's file system offers")
    detect.add_argument("home", metavar="HOME", type=Path)
    detect.set_defaults(func=run_detect)
    for sub, func in ((quota, run_quota), (plan, run_plan), (apply, run_apply)):
        sub.add_argument("--database-url", help="SQLAlchemy URL of the catalog")
        sub.set_defaults(func=func)


@contextmanager
def _session(args: argparse.Namespace) -> Iterator[Any]:
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope

    with open_catalog(args.database_url) as engine, session_scope(engine) as session:
        yield session


def _default(args: argparse.Namespace) -> int | None:
    from coursehub.homequota.plan import department_default, parse_quota

    return parse_quota(args.default, "--default") if args.default else department_default()


def run_quota(args: argparse.Namespace) -> int:
    """Record the quota of a course or a portal in the catalog."""
    from coursehub.catalog.courses import get_course, get_portal
    from coursehub.homequota.plan import parse_quota
    from coursehub.resources.units import format_mem

    size = parse_quota(args.size, "SIZE")
    with _session(args) as session:
        owner = (
            get_course(session, args.course) if args.course else get_portal(session, args.portal)
        )
        owner.home_quota = size
        name = args.course or args.portal
    print(f"{name}: home quota {format_mem(size) if size else 'none'}")
    return 0


def _describe(size: int | None) -> str:
    from coursehub.resources.units import format_mem

    return "no limit" if size is None else format_mem(size)


def run_plan(args: argparse.Namespace) -> int:
    """Print ``USER SIZE`` for every student of a live course."""
    from coursehub.homequota.plan import student_quotas

    with _session(args) as session:
        quotas = student_quotas(session, _default(args))
    for user, size in quotas.items():
        print(f"{user}\t{_describe(size)}")
    return 0


def run_apply(args: argparse.Namespace) -> int:
    """Set each student's quota on ``HOMES/USER``; homes not made yet are left for later."""
    from coursehub.homequota.fs import QuotaError, apply_limit, detect_backend, plan_limit
    from coursehub.homequota.plan import student_quotas

    if not args.root.is_dir():
        raise UsageError(f"folder of homes {args.root} does not exist")
    with _session(args) as session:
        quotas = student_quotas(session, _default(args))
    failed = 0
    for user, size in quotas.items():
        home = args.root / user
        if not home.is_dir():
            print(f"{user}\tno home at {home} yet")
            continue
        try:
            if args.dry_run:
                backend = detect_backend(home)
                for command in plan_limit(backend, user, home.stat().st_uid, str(home), size):
                    print(" ".join(command))
                continue
            backend = apply_limit(str(home), user, size)
            print(f"{user}\t{_describe(size)}\t{backend.kind}")
        except QuotaError as exc:
            print(f"{user}\tnot set: {exc}")
            failed += 1
    return 1 if failed else 0


def run_detect(args: argparse.Namespace) -> int:
    """Print the backend of ``HOME`` (status 0), or why there is none (status 1)."""
    from coursehub.homequota.fs import detect_backend

    backend = detect_backend(os.fspath(args.home))
    if backend.kind is None:
        print(f"{args.home}: no quota on {backend.mount}: {backend.reason}")
        return 1
    print(f"{args.home}: {backend.kind} on {backend.mount}")
    return 0
