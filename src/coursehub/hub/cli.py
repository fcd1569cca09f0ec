"""``coursehub hub ...``: the JupyterHub side from the command line.

One ``register_<name>(commands)`` and one ``run_<name>(args)`` per
sub-command; heavy modules (requests, SQLAlchemy) are imported only when a
sub-command runs, so ``coursehub --help`` stays fast.

``coursehub hub sync [--dry-run] [--prune] [--hub-url URL] [--token-env VAR]``
prints the plan (counts, then details) and applies it. The hub's API URL
comes from ``--hub-url``, ``COURSEHUB_HUB_API_URL`` or ``JUPYTERHUB_API_URL``;
the token from the variable named by ``--token-env``,
``COURSEHUB_HUB_API_TOKEN`` or ``JUPYTERHUB_API_TOKEN``; the catalog from
``COURSEHUB_DATABASE_URL`` (see :mod:`coursehub.catalog.db`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from coursehub.errors import UsageError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from coursehub.hub.hubclient import HubClient
    from coursehub.hub.reconcile import SyncPlan, SyncReport

#: What follows an applied ``hub sync`` (a module above, e.g. the team's shares).
AfterSync = Callable[["Session", "HubClient", Iterable[str]], Any]

#: Steps shown per kind of change unless ``--verbose``.
SHOWN_PER_STEP = 10

STEP_TITLES = {
    "create_users": "users to create",
    "create_groups": "groups to create",
    "set_properties": "group properties to set",
    "add_members": "memberships to add",
    "remove_members": "memberships to remove",
    "delete_groups": "groups to delete (--prune)",
    "delete_users": "users to delete (--prune)",
}


def register(subparsers: Any) -> Any:
    """Add ``coursehub hub`` with ``config`` to ``subparsers``.

    ``hub sync`` is a row of its own in :data:`coursehub.cli.COMMANDS`
    (:mod:`coursehub.usecases.hub_sync`: the sync, then the team's shares and the
    data folders), declared with :func:`add_sync_arguments` and carried out by
    :func:`run_sync`.

    Returns
    -------
    argparse._SubParsersAction
        The sub-commands of ``coursehub hub``, for the rows that add to them.
    """
    parser = subparsers.add_parser("hub", help="JupyterHub: sync the catalog into the hub")
    commands = parser.add_subparsers(dest="hub_command", metavar="COMMAND", required=True)
    register_config(commands)
    return commands


def register_config(commands: Any) -> None:
    """Add ``coursehub hub config`` (see :mod:`coursehub.hub.config`)."""
    from coursehub.hub import config

    parser = commands.add_parser(
        "config",
        help="print a complete, commented hub configuration for a real deployment",
        description="Print jupyterhub_config.py (systemd, local, slurm) or Zero to JupyterHub "
        "Helm values (kubernetes) with course profiles, the course app service and the culler; "
        "--lti FILE adds sign-in from the LMS (LTI 1.3, docs/lti.md).",
    )
    config.add_arguments(parser)
    parser.set_defaults(func=config.run)


def add_sync_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``coursehub hub sync`` on ``parser``; the caller sets ``func``."""
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument(
        "--prune",
        action="store_true",
        help="also delete users and groups coursehub created that left the catalog",
    )
    parser.add_argument("--hub-url", help="hub base or API URL (default: $COURSEHUB_HUB_API_URL)")
    parser.add_argument(
        "--token-env", metavar="VAR", help="environment variable holding the hub API token"
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=5,
        metavar="N",
        help="tries per request on connection errors and 5xx, with exponential backoff (5)",
    )
    parser.add_argument("--verbose", action="store_true", help="list every change in the plan")


def run_sync(args: argparse.Namespace, after: AfterSync | None = None) -> int:
    """Plan the sync, print it, apply it unless ``--dry-run``; return 0, or 1 on a hub error.

    One :func:`coursehub.hub.sync.sync_catalog`: a hub that cannot be read
    is reported (and recorded on every course) with nothing applied. While
    the plan is applied a progress bar (tqdm, on stderr) counts the users,
    groups and memberships done; the first Ctrl-C stops the sync after the
    request in flight (the next sync resumes it), a second one at once.
    ``after(session, client, course_ids)`` runs once the sync is applied
    (not with ``--dry-run``), in the same session and client.
    """
    import signal
    import threading

    from tqdm import tqdm

    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.hub.hubclient import RetryPolicy, client_from_env
    from coursehub.hub.sync import sync_catalog

    if args.attempts < 1:
        raise UsageError(f"--attempts must be >= 1, got {args.attempts}")
    client = client_from_env(args.hub_url, args.token_env, retry=RetryPolicy(args.attempts))
    stop = threading.Event()
    bars: list[tqdm[Any]] = []

    def on_plan(plan: SyncPlan) -> None:
        print(render_plan(plan, args.verbose, client.api_url), flush=True)
        if not args.dry_run and not plan.is_empty:
            bars.append(tqdm(total=plan.size, unit="item", desc="hub sync", leave=True))

    def on_interrupt(_signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nstopping after the request in flight (Ctrl-C again: at once)", flush=True)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with client, open_catalog() as engine, session_scope(engine) as session:
            outcome = sync_catalog(
                session,
                client,
                prune=args.prune,
                dry_run=args.dry_run,
                on_plan=on_plan,
                progress=lambda n: bars[0].update(n) if bars else None,
                stop=stop,
            )
            if after is not None and not outcome.dry_run:
                after(session, client, outcome.course_ids)
    finally:
        signal.signal(signal.SIGINT, previous)
        for bar in bars:
            bar.close()
    if outcome.plan is None or not (outcome.dry_run or outcome.plan.is_empty):
        print(render_report(outcome.report))
    return 0 if outcome.ok else 1


def render_plan(plan: SyncPlan, verbose: bool = False, where: str = "the hub") -> str:
    """Return the plan as text: one count line per kind of change, then the changes."""
    if plan.is_empty:
        return f"hub sync ({where}): nothing to do"
    counts = plan.counts()
    summary = ", ".join(f"{n} {STEP_TITLES[k]}" for k, n in counts.items() if n)
    lines = [f"hub sync ({where}): {summary}"]
    for key, title in STEP_TITLES.items():
        items = _plan_lines(plan, key)
        if not items:
            continue
        shown = items if verbose else items[:SHOWN_PER_STEP]
        lines.append(f"{title}:")
        lines.extend(f"  {item}" for item in shown)
        if len(items) > len(shown):
            lines.append(f"  ... and {len(items) - len(shown)} more (--verbose lists them)")
    return "\n".join(lines)


def _plan_lines(plan: SyncPlan, key: str) -> list[str]:
    if key in ("add_members", "remove_members"):
        sign = "+" if key == "add_members" else "-"
        changes = getattr(plan, key)
        return [
            f"{c.group}: {sign}{len(c.users)} ({', '.join(c.users[:5])}...)"
            if len(c.users) > 5
            else f"{c.group}: {sign}{', '.join(c.users)}"
            for c in changes
        ]
    if key == "set_properties":
        return [f"{c.group}: {_short(c.properties)}" for c in plan.set_properties]
    return list(getattr(plan, key))


def _short(properties: Any) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in sorted(properties.items()) if k != "profile")
    profile = properties.get("profile")
    return text + (f", profile={profile.get('name')!r}" if profile else "")


def render_report(report: SyncReport) -> str:
    """Return what the sync did: requests sent, errors, or where it stopped."""
    lines = [f"applied with {report.requests} requests" if report.ok else "sync incomplete:"]
    lines.extend(f"  error: {target}: {message}" for target, message in report.errors)
    if report.aborted:
        lines.append(f"  stopped: {report.aborted}")
        lines.append("  run `coursehub hub sync` again once the hub answers: it resumes")
    return "\n".join(lines)
