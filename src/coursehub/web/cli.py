"""``coursehub web serve``: run the course web app.

As a hub-managed service, the hub sets ``JUPYTERHUB_*`` variables (the
address to listen on comes from ``JUPYTERHUB_SERVICE_URL``). Standalone, a
development user must be named (``--dev-user NAME`` or
``COURSEHUB_DEV_USER``); otherwise the app refuses to start. Flask and the
server are imported only when the command runs.

``--workers 1`` (the default) serves with waitress in one process;
``--workers N`` (or ``auto``: one per usable CPU) forks N gunicorn processes
of ``--threads`` threads each, the production setting on a multi-core host
(see :mod:`coursehub.web.serving`).
"""

from __future__ import annotations

import argparse
import os
from typing import Any
from urllib.parse import urlsplit

DEFAULT_PORT = 8000


def register(subparsers: Any) -> None:
    """Add ``coursehub web`` and its ``serve`` sub-command to ``subparsers``."""
    parser = subparsers.add_parser("web", help="the course catalogue web app")
    commands = parser.add_subparsers(dest="web_command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve the web app (waitress; gunicorn with --workers N)",
        description="Serve the course web app. Production on a host with several cores: "
        "--workers auto (one gunicorn process per usable CPU, each with --threads threads); "
        "the default --workers 1 serves with waitress in this process.",
    )
    serve.add_argument(
        "--host", help="address to listen on (default: from the hub, else 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=int, help=f"port (default: from the hub, else {DEFAULT_PORT})"
    )
    serve.add_argument(
        "--workers",
        default="1",
        metavar="N",
        help="processes: 1 (default, waitress), N > 1 or 'auto' (gunicorn, one per CPU)",
    )
    serve.add_argument("--threads", type=int, default=8, help="threads per process (default 8)")
    serve.add_argument("--dev-user", metavar="NAME", help="standalone development: act as NAME")
    serve.add_argument("--dev-admin", action="store_true", help="the development user is admin")
    serve.add_argument(
        "--dev-group",
        action="append",
        default=[],
        metavar="GROUP",
        help="hub group of the development user (repeatable; 'teachers' may create courses)",
    )
    serve.set_defaults(func=run_serve)


def plan_address(args: argparse.Namespace, environ: dict[str, str]) -> tuple[str, int]:
    """Return (host, port): the arguments, else ``JUPYTERHUB_SERVICE_URL``, else the defaults."""
    url = urlsplit(environ.get("JUPYTERHUB_SERVICE_URL", ""))
    host = args.host or url.hostname or "127.0.0.1"
    port = args.port or url.port or DEFAULT_PORT
    return host, port


def plan_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Return the config the command line adds (the development user, if named)."""
    if not args.dev_user:
        return {}
    return {"DEV_USER": args.dev_user, "DEV_ADMIN": args.dev_admin, "DEV_GROUPS": args.dev_group}


def run_serve(args: argparse.Namespace) -> int:
    """Create the app (refusing bad configuration or schema) and serve it until interrupted."""
    from coursehub.resources.cpus import effective_cpus
    from coursehub.web.app import create_app
    from coursehub.web.config import plan_prefix
    from coursehub.web.serving import ServerPlan, plan_workers, serve_gunicorn, serve_waitress

    workers = plan_workers(args.workers, effective_cpus())
    app = create_app(plan_overrides(args) or None)
    host, port = plan_address(args, dict(os.environ))
    plan = ServerPlan(host, port, workers, args.threads)
    server = "waitress" if workers == 1 else f"gunicorn, {workers} processes"
    print(
        f"coursehub web: serving on http://{host}:{port}{plan_prefix(app.config)} "
        f"({server}, {plan.threads} threads each)",
        flush=True,
    )
    (serve_waitress if workers == 1 else serve_gunicorn)(app, plan)
    return 0
