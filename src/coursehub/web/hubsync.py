"""Sync the catalog into the hub after a change made in the web app, and record the outcome.

When the app can reach the hub's REST API with a token (:func:`plan_hub_sync`),
each committed change that affects the hub (roster import, member added or
removed, course created or edited, profile edited) calls :func:`apply_hub_sync`:
the catalog is planned against the hub and applied by
:mod:`coursehub.hub.sync` (never pruning: deleting users stays a deliberate
``coursehub hub sync --prune``), and the outcome is written on every synced
course (``last_sync_at``, ``last_sync_status``).

Scope: the course the change is about. :func:`coursehub.hub.sync.sync_catalog`
with ``course_ids=[course_id]`` reads only that course's two groups and
``coursehub-users`` from the hub and plans only them; a change without one
course (a profile edit, used by several courses) syncs the whole catalog.
A hub that cannot be read is an outcome like any other: recorded on the
courses in scope, nothing applied.

In a background thread, waited for a bounded time: the change is
committed first, then the sync is handed to the app's
:class:`~coursehub.hub.background.BackgroundSync` (one sync at a time per
process; scopes queued meanwhile are merged into the next one) and the
request waits for it at most ``HUB_SYNC_WAIT_S`` seconds (5 s). A one-course
change is done by then and the user sees its outcome at once; a larger sync
(a profile edit syncs the whole catalog, or a big roster import) goes on in
the background, the answer says so (:data:`RUNNING`), and each course records
its outcome when it is done (``last_sync_status``, shown on its page). The
sync's requests use few attempts and a short timeout (``HUB_SYNC_ATTEMPTS``,
``HUB_SYNC_TIMEOUT_S``) and are paced (:mod:`coursehub.hub.pacing`). A sync
cut short by the end of a WSGI worker loses nothing: the next sync resumes it.

Configuration keys (``COURSEHUB_<KEY>`` variables): ``HUB_SYNC`` (on by
default; ``0``/``false``/``off`` turns it off), ``HUB_SYNC_URL`` and
``HUB_SYNC_TOKEN`` (default: the hub service's ``JUPYTERHUB_API_URL`` and
``JUPYTERHUB_API_TOKEN``, or ``COURSEHUB_HUB_API_URL``), ``HUB_SYNC_ATTEMPTS``,
``HUB_SYNC_TIMEOUT_S``, ``HUB_SYNC_WAIT_S``. The token needs the scopes of ``coursehub hub sync``:
``admin:users``, ``admin:groups``, ``list:users``, ``read:users``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from flask import Flask, current_app, flash
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from coursehub.errors import UsageError
from coursehub.hub.background import BackgroundSync, SyncJob, SyncTracker
from coursehub.hub.hubclient import HubClient, RetryPolicy, normalize_api_url
from coursehub.hub.reconcile import SyncReport, render_course_errors
from coursehub.hub.sync import SyncOutcome, sync_catalog
from coursehub.usecases.hub_sync import after_sync
from coursehub.web.database import SESSIONS_KEY

log = logging.getLogger(__name__)

SETTINGS_KEY = "coursehub.hubsync"
WORKER_KEY = "coursehub.hubsync.worker"
#: Status of a change whose sync goes on after the answer.
RUNNING = "running: the hub sync goes on in the background; the course page shows its outcome"
#: Status of a change made while the sync is off.
OFF = "off"
#: Status of a course that the sync leaves out (archived, or of a closed year).
NOT_SYNCED = "not synced: archived course or closed year"
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class HubSyncSettings:
    """Where and how the web app syncs: ``api_url`` None means off, ``off_reason`` says why."""

    api_url: str | None
    token: str = field(default="", repr=False)
    attempts: int = 2
    timeout_s: float = 5.0
    off_reason: str = ""
    wait_s: float = 5.0

    @property
    def enabled(self) -> bool:
        """True when changes are synced to the hub."""
        return self.api_url is not None

    def retry(self) -> RetryPolicy:
        """The retry policy of the sync's requests: few, short tries (the user is waiting)."""
        return RetryPolicy(
            self.attempts, backoff_s=0.2, backoff_max_s=1.0, timeout_s=self.timeout_s
        )


@dataclass(frozen=True)
class HubSyncOutcome:
    """A course's sync outcome: ``status`` (``"ok"``, ``"error: ..."``, ``"off"``), ``at``."""

    status: str
    at: datetime | None = None

    @property
    def failed(self) -> bool:
        """True when the sync ran and left the course in error."""
        return self.status.startswith("error")

    @property
    def running(self) -> bool:
        """True when the sync goes on in the background."""
        return self.status == RUNNING

    def header(self) -> str:
        """Return the status as an HTTP header value (ASCII, one line, 200 characters at most)."""
        text = " ".join(self.status.split())[:200]
        return text.encode("ascii", "replace").decode("ascii")

    def to_json(self) -> dict[str, Any]:
        """Return ``{"status": ..., "at": ISO 8601 or None}`` for API answers."""
        return {"status": self.status, "at": self.at.isoformat() if self.at else None}


def parse_flag(value: Any) -> bool:
    """Return a boolean setting from a bool, a number or a string (``"0"``, ``"off"``: False)."""
    if isinstance(value, str):
        return value.strip().lower() not in FALSE_WORDS
    return bool(value)


def plan_hub_sync(config: Mapping[str, Any]) -> HubSyncSettings:
    """Decide whether and where the web app syncs (pure).

    Returns
    -------
    HubSyncSettings
        Off (with the reason) when ``HUB_SYNC`` is false or no URL and token
        are configured; else the normalised API URL, token and retry bounds.

    Raises
    ------
    UsageError
        For a URL that is not http(s), ``HUB_SYNC_ATTEMPTS`` < 1, a
        ``HUB_SYNC_TIMEOUT_S`` that is not positive or a negative ``HUB_SYNC_WAIT_S``.
    """
    if not parse_flag(config.get("HUB_SYNC", True)):
        return HubSyncSettings(None, off_reason="turned off (COURSEHUB_HUB_SYNC)")
    url = config.get("HUB_SYNC_URL") or config.get("HUB_API_URL")
    token = config.get("HUB_SYNC_TOKEN") or config.get("HUB_API_TOKEN")
    if not url or not token:
        return HubSyncSettings(None, off_reason="no hub API URL and token (standalone mode)")
    attempts = int(config.get("HUB_SYNC_ATTEMPTS", 2))
    timeout_s = float(config.get("HUB_SYNC_TIMEOUT_S", 5.0))
    if attempts < 1:
        raise UsageError(f"COURSEHUB_HUB_SYNC_ATTEMPTS must be >= 1, got {attempts}")
    if timeout_s <= 0:
        raise UsageError(f"COURSEHUB_HUB_SYNC_TIMEOUT_S must be > 0, got {timeout_s:g}")
    wait_s = float(config.get("HUB_SYNC_WAIT_S", 5.0))
    if wait_s < 0:
        raise UsageError(f"COURSEHUB_HUB_SYNC_WAIT_S must be >= 0, got {wait_s:g}")
    url = normalize_api_url(str(url))
    return HubSyncSettings(url, str(token), attempts, timeout_s, wait_s=wait_s)


def init_app(app: Flask) -> None:
    """Decide the app's sync settings once (see :func:`plan_hub_sync`); make its worker."""
    settings = app.extensions[SETTINGS_KEY] = plan_hub_sync(app.config)
    if settings.enabled:
        factory = app.extensions[SESSIONS_KEY]

        def run(course_ids: Collection[str] | None, tracker: SyncTracker) -> SyncOutcome:
            with factory() as session:
                return run_sync(settings, session, course_ids, tracker=tracker)

        app.extensions[WORKER_KEY] = BackgroundSync(run)


def hub_sync_worker() -> BackgroundSync:
    """Return the current app's background sync (its ``state()`` tells what it does)."""
    return cast(BackgroundSync, current_app.extensions[WORKER_KEY])


def hub_sync_settings() -> HubSyncSettings:
    """Return the current app's sync settings."""
    return cast(HubSyncSettings, current_app.extensions[SETTINGS_KEY])


def hub_client() -> HubClient | None:
    """Return a client of the hub's REST API with the app's hub token (the sync's URL,
    token and retries of :func:`hub_sync_settings`), or None when the app has no hub."""
    settings = hub_sync_settings()
    if settings.api_url is None:
        return None
    return HubClient(settings.api_url, settings.token, retry=settings.retry())


def run_sync(
    settings: HubSyncSettings,
    session: Session,
    course_ids: Collection[str] | None,
    now: datetime | None = None,
    tracker: SyncTracker | None = None,
) -> SyncOutcome:
    """Sync ``course_ids`` (None: the whole catalog) with the app's settings and commit;
    never raises for the hub's answers (:func:`coursehub.hub.sync.sync_catalog`, never
    pruning). Raises :class:`~sqlalchemy.exc.SQLAlchemyError` (rolled back) when the
    catalog cannot be read or written."""
    assert settings.api_url is not None
    hooks: dict[str, Any] = {}
    if tracker is not None:
        hooks = {"on_plan": tracker.on_plan, "progress": tracker.progress, "stop": tracker.stop}
    scope = None if course_ids is None else sorted(course_ids)
    try:
        with HubClient(settings.api_url, settings.token, retry=settings.retry()) as client:
            outcome = sync_catalog(session, client, course_ids=scope, now=now, **hooks)
            after_sync(session, client, outcome.course_ids)  # team shares, data folders
        session.commit()
    except SQLAlchemyError:
        session.rollback()
        raise
    return outcome


def apply_hub_sync(session: Session, course_id: str | None) -> HubSyncOutcome:
    """Sync a committed change into the hub; return the outcome, or :data:`RUNNING`.

    Hands the sync of the course ``course_id`` (None: the whole catalog) to
    the app's background worker and waits for it at most
    ``HUB_SYNC_WAIT_S``; every synced course gets ``last_sync_at``/
    ``last_sync_status`` (committed by the worker). Returns the outcome of
    ``course_id`` (None: of the whole run): ``"off"`` when the sync is off,
    :data:`NOT_SYNCED` for a course the sync leaves out, :data:`RUNNING`
    when the sync goes on. Hub failures are recorded, never raised.
    """
    settings = hub_sync_settings()
    if not settings.enabled:
        return HubSyncOutcome(OFF)
    when = datetime.now(UTC)
    job = hub_sync_worker().submit(None if course_id is None else [course_id])
    if not job.wait(settings.wait_s):
        return HubSyncOutcome(RUNNING, when)
    session.expire_all()  # the worker's session recorded the statuses
    return job_outcome(job, course_id, when)


def job_outcome(job: SyncJob, course_id: str | None, when: datetime) -> HubSyncOutcome:
    """Return the outcome of ``course_id`` (None: of the run) in a finished ``job``."""
    outcome = job.outcome
    if outcome is None:
        log.error("hub sync: could not read the catalog or record its status: %s", job.error)
        return HubSyncOutcome("error: the catalog could not be read for the hub sync", when)
    if not outcome.ok:
        log.warning("hub sync incomplete: %s", outcome.report)
    status = render_outcome(list(outcome.course_ids), outcome.report, course_id)
    return HubSyncOutcome(status, when)


def render_outcome(course_ids: list[str], report: SyncReport, course_id: str | None) -> str:
    """Return the status of ``course_id`` after ``report``, or of the whole run for None (pure)."""
    if course_id is not None:
        return render_course_errors(course_ids, report).get(course_id, NOT_SYNCED)
    if report.ok:
        return "ok"
    if report.aborted:
        return f"error: sync interrupted: {report.aborted}"
    return "error: " + ": ".join(report.errors[0])


def flash_outcome(outcome: HubSyncOutcome, quiet: bool = True) -> None:
    """Flash a failed sync as a warning; with ``quiet`` False, also success and "off"."""
    if outcome.failed:
        flash(
            f"Saved, but the hub is not up to date: {outcome.status}. "
            "Students may not see the change until a sync succeeds.",
            "warning",
        )
    elif outcome.running:
        flash(
            "Saved. The hub sync goes on in the background; each course page shows "
            "its outcome when it is done.",
            "info",
        )
    elif not quiet and outcome.status == OFF:
        flash(f"Hub sync is off: {hub_sync_settings().off_reason}.", "warning")
    elif not quiet:
        flash(f"Hub sync: {outcome.status}.", "success")
