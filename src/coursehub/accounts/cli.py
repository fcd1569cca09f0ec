"""``coursehub accounts sync [--dry-run]``: a Unix account per roster username (docs/deploy.md).

Imports nothing heavy at module level (``coursehub --help`` stays fast).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``coursehub accounts`` and its sub-command ``sync``."""
    from coursehub.catalog.cli import add_database_url

    parser = subparsers.add_parser("accounts", help="Unix accounts of students and teams")
    commands = parser.add_subparsers(dest="accounts_command", metavar="COMMAND", required=True)
    sync = commands.add_parser(
        "sync",
        help="create the missing Unix accounts and set the course groups from the catalog",
        description="Print the plan, then apply it: useradd (locked password, home 0700) "
        "for each roster username without an account, Unix groups cht-<course_id> (team) "
        "and chs-<course_id> (students) with exactly the roster. Never deletes an account "
        "or a home; an account whose owner left every course is reported. Needs root.",
    )
    sync.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    add_database_url(sync)
    sync.set_defaults(func=run_sync)


def run_sync(args: argparse.Namespace) -> int:
    """Run ``coursehub accounts sync``: exit status 1 when a username was refused."""
    from coursehub.accounts.apply import apply_plan, read_accounts, read_groups
    from coursehub.accounts.plan import plan_accounts, render_plan
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_factory
    from coursehub.coursedata.ensure import load_rosters

    with open_catalog(args.database_url) as engine, session_factory(engine)() as session:
        rosters = load_rosters(session)
    plan = plan_accounts(rosters, read_accounts(), read_groups())
    print(render_plan(plan))
    if not args.dry_run:
        apply_plan(plan)
        if plan.changes:
            print(f"applied {plan.changes} changes")
    return 1 if plan.refused else 0
