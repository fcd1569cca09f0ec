"""Run syncs in a background thread, one at a time, so that nobody waits on a full sync.

The course app and the demo hand their syncs to a :class:`BackgroundSync`:
:meth:`~BackgroundSync.submit` queues a scope (some courses, or None: the
whole catalog) and returns a :class:`SyncJob` at once; the caller may wait
on it for a bounded time (:meth:`SyncJob.wait`) and answer with the outcome
when it came in time, else with "running in the background". Scopes queued
while a sync runs are merged into one next job (the union of their courses;
the whole catalog absorbs any course), so a burst of edits costs one sync.

The worker thread runs while there is work and then ends; it is a daemon
thread: it dies with its process, which loses nothing (each sync step is
idempotent, statuses are recorded by :func:`coursehub.hub.sync.sync_catalog`
in one transaction, and the next sync resumes). Its state
(:meth:`~BackgroundSync.state`: phase, scope, progress, last outcome) is
kept in memory and, with ``state_path``, written atomically as JSON after
each change of phase and at most every :data:`STATE_WRITE_S` seconds of
progress.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.hub.reconcile import SyncPlan, SyncReport
from coursehub.hub.sync import SyncOutcome

log = logging.getLogger(__name__)

#: Seconds between two writes of the state file while a sync progresses.
STATE_WRITE_S = 1.0


@dataclass
class SyncTracker:
    """What a running sync reports to its :class:`BackgroundSync`: hooks for ``sync_catalog``.

    Pass ``on_plan``, ``progress`` and ``stop`` to
    :func:`coursehub.hub.sync.sync_catalog`.
    """

    stop: threading.Event
    changed: Callable[[], None] = lambda: None
    total: int = 0
    done: int = 0

    def on_plan(self, plan: SyncPlan) -> None:
        """Note the plan's size (the progress total)."""
        self.total = plan.size
        self.changed()

    def progress(self, items: int) -> None:
        """Count ``items`` done."""
        self.done += items
        self.changed()


#: A sync: (course_ids or None, tracker) -> outcome.
SyncRun = Callable[[Collection[str] | None, SyncTracker], SyncOutcome]


@dataclass
class SyncJob:
    """One queued sync: its scope (``course_ids`` None: the whole catalog) and, once done,
    its ``outcome`` or the ``error`` that prevented it (a message)."""

    course_ids: set[str] | None
    finished: threading.Event = field(default_factory=threading.Event)
    outcome: SyncOutcome | None = None
    error: str | None = None

    def wait(self, timeout_s: float | None) -> bool:
        """Wait at most ``timeout_s`` seconds (None: no bound); return True once the job is done."""
        return self.finished.wait(timeout_s)

    def merge(self, course_ids: Collection[str] | None) -> None:
        """Widen the scope to cover ``course_ids`` too."""
        if self.course_ids is None or course_ids is None:
            self.course_ids = None
        else:
            self.course_ids |= set(course_ids)


class BackgroundSync:
    """Queue syncs and run them one at a time in a daemon thread.

    Parameters
    ----------
    run
        Runs one sync (opens its own catalog session and hub client, commits).
    state_path
        Where to write the state as JSON (None: in memory only).
    on_done
        Called in the worker thread with each finished job.
    """

    def __init__(
        self,
        run: SyncRun,
        state_path: Path | None = None,
        on_done: Callable[[SyncJob], None] | None = None,
    ) -> None:
        self.run, self.state_path, self.on_done = run, state_path, on_done
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.pending: SyncJob | None = None
        self.running: SyncJob | None = None
        self.tracker: SyncTracker | None = None
        self.started_at: datetime | None = None
        self.last: dict[str, Any] | None = None
        self.thread: threading.Thread | None = None
        self._written = 0.0

    def submit(self, course_ids: Collection[str] | None) -> SyncJob:
        """Queue a sync of ``course_ids`` (None: the whole catalog); return its job at once."""
        with self.lock:
            if self.pending is None:
                self.pending = SyncJob(None if course_ids is None else set(course_ids))
            else:
                self.pending.merge(course_ids)
            job = self.pending
            if self.thread is None:  # the worker clears it, under the lock, as it ends
                self.thread = threading.Thread(target=self._work, name="hub-sync", daemon=True)
                self.thread.start()
        self._write_state(force=True)
        return job

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the running sync after its request in flight; drop what is queued."""
        with self.lock:
            self.pending = None
        self.stop_event.set()
        thread = self.thread
        if thread is not None:
            thread.join(timeout_s)

    def state(self) -> dict[str, Any]:
        """Return the state as JSON-ready data: ``phase`` (idle/running), ``scope``,
        ``started_at``, ``done``/``total``, ``queued`` and ``last`` (the last outcome)."""
        with self.lock:
            running, tracker, queued = self.running, self.tracker, self.pending is not None
        state: dict[str, Any] = {"phase": "running" if running else "idle", "queued": queued}
        if running is not None and tracker is not None:
            state |= {
                "scope": _scope(running.course_ids),
                "started_at": self.started_at.isoformat() if self.started_at else None,
                "done": tracker.done,
                "total": tracker.total,
            }
        state["last"] = self.last
        return state

    def _work(self) -> None:
        while not self.stop_event.is_set():
            with self.lock:
                job, self.pending = self.pending, None
                if job is None:
                    self.thread = None
                    return
                self.running, self.started_at = job, datetime.now(UTC)
                self.tracker = SyncTracker(self.stop_event, self._write_state)
                tracker = self.tracker
            self._write_state(force=True)
            try:
                job.outcome = self.run(job.course_ids, tracker)
            except Exception as exc:  # a catalog error: kept on the job, logged
                log.exception("hub sync in the background failed")
                job.error = f"{type(exc).__name__}: {exc}"
            with self.lock:
                self.running = self.tracker = None
                self.last = _describe(job)
            self._write_state(force=True)
            job.finished.set()
            if self.on_done is not None:
                self.on_done(job)

    def _write_state(self, force: bool = False) -> None:
        if self.state_path is None:
            return
        now = time.monotonic()
        if not force and now - self._written < STATE_WRITE_S:
            return
        self._written = now
        try:
            text = json.dumps(self.state(), indent=1) + "\n"
            write_atomically(self.state_path, text, 0o600)
        except OSError as exc:
            log.warning("hub sync: cannot write %s: %s", self.state_path, exc)


def sync_in_background(
    sync: Callable[[], SyncOutcome],
    state_path: Path | None,
    wait_s: float = 15.0,
    announce: str = "coursehub: hub sync",
) -> SyncReport | str:
    """Start ``sync`` in the background; wait for it at most ``wait_s`` seconds.

    Returns its report when it finished in time, else a line saying that it
    runs in the background (and where its state is); its outcome is then
    printed as ``"{announce}: ..."`` once it is done. For start-up banners
    (``coursehub demo``), which must not wait on a large catalog.
    """
    late = threading.Event()

    def done(job: SyncJob) -> None:
        if late.is_set():
            print(f"{announce}: {_describe(job)['summary']}", flush=True)

    worker = BackgroundSync(lambda _ids, _tracker: sync(), state_path, on_done=done)
    job = worker.submit(None)
    if not job.wait(wait_s):
        late.set()
        if not job.finished.is_set():
            where = f" (state in {state_path})" if state_path else ""
            return f"running in the background{where}; its outcome is printed here when done"
    if job.outcome is not None:
        return job.outcome.report
    return f"failed: {job.error}"


def describe_report(report: SyncReport) -> str:
    """Return a one-line summary of a sync's report (pure)."""
    if report.ok:
        return f"ok ({report.requests} requests)"
    if report.aborted:
        return f"interrupted: {report.aborted}"
    target, message = report.errors[0]
    return f"{len(report.errors)} error(s), first: {target}: {message}"


def _describe(job: SyncJob) -> dict[str, Any]:
    text = job.error if job.outcome is None else describe_report(job.outcome.report)
    return {
        "scope": _scope(job.course_ids),
        "finished_at": datetime.now(UTC).isoformat(),
        "ok": job.outcome is not None and job.outcome.ok,
        "summary": text,
    }


def _scope(course_ids: set[str] | None) -> str | list[str]:
    return "catalog" if course_ids is None else sorted(course_ids)
