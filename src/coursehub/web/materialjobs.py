"""Update now in the course app: the mirror is updated in a background thread, not the request.

:func:`start_update` records ``updating`` (committed: the course page shows
it at once) and hands :func:`coursehub.material.service.run_update` to a
daemon thread of its own session factory; one thread per course in this
process (another process, e.g. the timer's ``coursehub material update
--all``, is kept out by the course's lock file). After a first good update
the course is synced into the hub, so that new servers get the material, and
the course's book is rebuilt where it asks for it, as ``coursehub material
update`` does (:func:`coursehub.usecases.material_update.rebuild_book`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from flask import current_app
from sqlalchemy.orm import Session, sessionmaker

from coursehub.books.settings import books_root
from coursehub.catalog.material import mark_requested
from coursehub.catalog.models.courses import Course
from coursehub.material.layout import MaterialLayout, material_root
from coursehub.material.service import UpdateOutcome, run_update
from coursehub.usecases.material_update import rebuild_book
from coursehub.web.database import SESSIONS_KEY
from coursehub.web.hubsync import hub_sync_settings, hub_sync_worker

log = logging.getLogger(__name__)
JOBS_KEY = "coursehub.material_jobs"


def material_layout() -> MaterialLayout:
    """The app's mirrors: ``MATERIAL_DIR`` (``COURSEHUB_MATERIAL_DIR``), else the default."""
    configured = current_app.config.get("MATERIAL_DIR")
    return MaterialLayout(Path(configured) if configured else material_root())


def _threads() -> dict[str, Any]:
    return current_app.extensions.setdefault(JOBS_KEY, {"lock": threading.Lock(), "threads": {}})


def start_update(session: Session, course: Course, accept_rewrite: bool = False) -> bool:
    """Record ``updating`` and start the update of ``course``; False if one runs in this process."""
    jobs = _threads()
    course_id = course.course_id
    with jobs["lock"]:
        running = jobs["threads"].get(course_id)
        if running is not None and running.is_alive():
            return False
        assert course.material is not None
        mark_requested(course.material)
        session.commit()
        sessions: sessionmaker[Session] = current_app.extensions[SESSIONS_KEY]
        worker = hub_sync_worker() if hub_sync_settings().enabled else None
        # read in the request: the thread has no app context
        books_dir = current_app.config.get("BOOKS_DIR")
        books = Path(books_dir) if books_dir else books_root()
        layout = material_layout()
        shared = current_app.config.get("SHARED_ROOT")

        def on_published(outcome: UpdateOutcome) -> None:
            if worker is not None and outcome.first_publication:
                worker.submit([course_id])
            rebuild_book(outcome, books, layout.root, Path(shared) if shared else None)

        thread = threading.Thread(
            target=_run,
            args=(sessions, course_id, layout, accept_rewrite, on_published),
            name=f"material-{course_id}",
            daemon=True,
        )
        jobs["threads"][course_id] = thread
        thread.start()
    return True


def _run(*args: Any) -> None:
    try:
        outcome = run_update(*args)
        log.info("material of %s: %s", args[1], outcome.message)
    except Exception:  # a thread has nobody to raise to: log it, the page shows "updating"
        log.exception("material update of %s failed", args[1])


def wait_for_update(course_id: str, timeout: float | None = None) -> bool:
    """Wait for this process's update of ``course_id``; True when none is running any more."""
    thread = _threads()["threads"].get(course_id)
    if thread is not None:
        thread.join(timeout)
        return not thread.is_alive()
    return True
