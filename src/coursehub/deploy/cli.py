"""``coursehub deploy [--dry-run] [--root DIR] ...``: a Debian 12 host made into a department hub.

Imports nothing heavy at module level (``coursehub --help`` stays fast).
See docs/deploy.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``coursehub deploy`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "deploy",
        help="install this Debian host as a department hub (systemd units, TLS, secrets)",
        description="Write /etc/coursehub (settings, 0600 secrets made once, TLS), "
        "/var/lib/coursehub, the hub configuration (systemd spawner) and the systemd units "
        "of the hub, the course app and the timers; create and migrate the catalog; then run "
        "coursehub doctor. Prints the plan first; a second run changes nothing. Starts no "
        "service: systemctl daemon-reload and enable --now are the administrator's.",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument(
        "--root", type=Path, default=Path("/"), help="write below DIR (a non-booted install)"
    )
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the catalog: a SQLite file, or a local PostgreSQL role and database (default sqlite)",
    )
    parser.add_argument("--tls-cert", type=Path, metavar="FILE", help="the hub's certificate (PEM)")
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="its private key (PEM)")
    parser.add_argument(
        "--hostname", help="the name in a trial certificate (default: this host's FQDN)"
    )
    parser.add_argument("--port", type=int, default=443, help="HTTPS port (default 443)")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter with coursehub installed, as the units run it (default: this one)",
    )
    parser.add_argument(
        "--proxy",
        help="configurable-http-proxy (default: the one on the PATH, else the one in the "
        "virtual environment of --python, VENV/node/node_modules/.bin)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plan, print, apply, then run ``coursehub doctor``; 0 when the install's steps succeeded."""
    import os
    import socket

    from coursehub.deploy import host
    from coursehub.deploy.install import DeployOptions, apply_plan, make_plan, render_plan
    from coursehub.deploy.layout import DeployLayout
    from coursehub.errors import UsageError

    proxy = args.proxy or host.find_proxy(args.python)
    if not proxy or not os.access(proxy, os.X_OK):
        where = (
            f"{proxy}: not an executable"
            if proxy
            else (f"is not on the PATH nor in the virtual environment (VENV/{host.VENV_PROXY})")
        )
        raise UsageError(
            f"configurable-http-proxy {where}; "
            "give --proxy PATH (npm install -g configurable-http-proxy)"
        )
    layout = DeployLayout(root=args.root.resolve())
    options = DeployOptions(
        layout=layout,
        python=args.python,
        proxy=proxy,
        database=args.database,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        port=args.port,
    )
    plan = make_plan(options)
    print(render_plan(plan, layout.root))
    if args.dry_run:
        return 0
    apply_plan(options, plan, args.hostname or socket.getfqdn())
    if plan.changes:
        print(f"applied {plan.changes} changes")
    env = {
        "COURSEHUB_DATA_DIR": str(layout.on_disk(layout.var)),
        "COURSEHUB_DATABASE_URL": plan.database_url,
    }
    status, output = host.run_doctor(args.python, env)
    print("coursehub doctor:")
    print(output)
    if status:
        print(f"coursehub doctor: exit status {status}; start the units, then run it again")
    return 0
