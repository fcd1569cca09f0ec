"""What follows each hub sync of the course app: team shares, then data folders.

Called by :func:`coursehub.web.hubsync.run_sync` with the sync's client,
after :func:`coursehub.hub.sync.sync_catalog`, for the courses it synced:

* :func:`coursehub.teamaccess.shares.sync_team_shares`: a new student's
  server is shared with the team (its group, and each member: JupyterHub 6.1
  gives a server's OAuth token the direct shares only), a former student's
  shares revoked, a new team member's granted and a removed one's revoked,
  paced by one :class:`~coursehub.hub.pacing.Pacer` for all the courses;
* :func:`coursehub.coursedata.ensure.ensure_data`, when the app runs as root
  with ``COURSEHUB_SHARED_ROOT`` set: the course's Unix groups follow the roster.

Failures are logged, never raised: the sync's own outcome is what the course page shows.

``coursehub hub sync`` runs the same step: the command lives here (its row of
:data:`coursehub.cli.COMMANDS`, :func:`register`), since ``hub`` may not
import ``teamaccess`` or ``coursedata`` (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from coursehub.courselayout import SHARED_ROOT_ENV, shared_root
from coursehub.errors import CoursehubError
from coursehub.hub.cli import add_sync_arguments

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from coursehub.hub.hubclient import HubClient

log = logging.getLogger(__name__)
#: One line for ``coursehub hub --help``.
HELP = "sync the catalog into the hub, then the team's shares and data folders"


def register(commands: Any) -> None:
    """Add ``sync`` to the sub-commands of ``coursehub hub`` (``commands``)."""
    parser = commands.add_parser(
        "sync",
        help=HELP,
        description="Reconcile the catalog into JupyterHub (users, nbgrader-/formgrade- groups).",
    )
    add_sync_arguments(parser)
    parser.set_defaults(func=run)


def after_sync(session: Session, client: HubClient, course_ids: Iterable[str]) -> None:
    """Refresh the team shares and, as root with a shared root, the data folders.

    Failures are logged as warnings, never raised.
    """
    from coursehub.coursedata.ensure import ensure_data
    from coursehub.hub.pacing import Pacer
    from coursehub.teamaccess.shares import sync_team_shares

    course_ids = sorted(course_ids)
    pacer = Pacer()
    for course_id in course_ids:
        try:
            report = sync_team_shares(client, course_id, pacer)
        except CoursehubError as exc:
            log.warning("team shares of %s not refreshed: %s", course_id, exc)
            continue
        for student, message in report.errors:
            log.warning("team share of %s in %s: %s", student, course_id, message)
    if os.geteuid() != 0 or not os.environ.get(SHARED_ROOT_ENV) or not course_ids:
        return
    try:
        outcomes = ensure_data(session, shared_root(), course_ids)
    except CoursehubError as exc:
        log.warning("data folders not refreshed: %s", exc)
        return
    for outcome in outcomes:
        if outcome.error:
            log.warning("data folder: %s", outcome.error)


def run(args: argparse.Namespace) -> int:
    """``coursehub hub sync``: :func:`coursehub.hub.cli.run_sync`, then :func:`after_sync`."""
    from coursehub.hub.cli import run_sync

    if not logging.getLogger().handlers:  # the CLI: warnings as one line each on stderr
        logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    return run_sync(args, after=after_sync)
