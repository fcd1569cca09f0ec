"""``coursehub upgrade [--dry-run] [--root DIR]``: upgrade an install, students' servers kept.

Imports nothing heavy at module level (``coursehub --help`` stays fast).
See docs/deploy.md, "Upgrade".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``coursehub upgrade`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "upgrade",
        help="back up, migrate the catalog, re-render the install, restart the hub and the "
        "course app (students' servers keep running)",
        description="Run after installing a new coursehub into the install's interpreter. "
        "Steps, each only once the one before succeeded: a backup into "
        "/var/lib/coursehub/backups, the catalog's migrations, the files of `coursehub deploy` "
        "re-rendered with the install's choices, systemctl try-restart of coursehub-hub and "
        "coursehub-web. Students' servers (their own systemd units), kernels and runner jobs "
        "keep running; the restarted hub finds them again.",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument(
        "--root", type=Path, default=Path("/"), help="the install below DIR (restarts nothing)"
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter with coursehub installed, as the units run it (default: this one)",
    )
    parser.add_argument(
        "--hostname", help="the name in a new trial certificate (default: this host's FQDN)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan, print, then (unless ``--dry-run``) carry out the upgrade; 0 when every step did."""
    import socket
    from datetime import UTC, datetime

    from coursehub.deploy.layout import DeployLayout
    from coursehub.upgrade.apply import apply_upgrade
    from coursehub.upgrade.plan import make_upgrade_plan, render_upgrade_plan

    layout = DeployLayout(root=args.root.resolve())
    plan = make_upgrade_plan(layout, args.python, datetime.now(UTC))
    print(render_upgrade_plan(plan))
    if args.dry_run:
        return 0
    for line in apply_upgrade(plan, args.hostname or socket.getfqdn()):
        print(line)
    return 0
