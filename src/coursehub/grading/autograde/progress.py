"""The progress record of a running autograde, for the course page to read while it runs.

The autograde writes ``<course_dir>/coursehub/autograde-<assignment>.progress.json``
(:func:`coursehub.atomicfile.write_atomically`: a reader sees the old record or
the new one, never half of one) when it starts and each time a submission
is done; :func:`read_autograde_progress` reads it. A record that says
``running`` whose process is gone (killed, machine restarted) reads as
``interrupted``: run the autograde again and it continues where it stopped.

Fields (:class:`AutogradeProgress`): ``state`` (``not-started``,
``starting``, ``running``, ``done``, ``interrupted``), ``graded`` /
``total`` (submissions of roster students done / to do, skipped ones
included), ``skipped`` (graded by an earlier run), ``failures`` (every
submission that did not end ``graded``, with its reason), ``running_now``
(students whose job is running), ``started_at`` / ``updated_at`` (Unix
seconds), ``estimated_s_left`` and the autograde's ``pid``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.grading.layout import CourseLayout
from coursehub.resources.processes import pid_running


@dataclass(frozen=True)
class AutogradeFailure:
    """A submission that did not end ``graded``: who, its status and why."""

    student_id: str
    status: str
    message: str


@dataclass(frozen=True)
class AutogradeProgress:
    """Where an autograde of one assignment stands (see the module's docstring)."""

    course_id: str
    assignment: str
    state: str = "not-started"
    graded: int = 0
    total: int = 0
    skipped: int = 0
    failures: tuple[AutogradeFailure, ...] = ()
    running_now: tuple[str, ...] = ()
    parallel: int = 0
    started_at: float | None = None
    updated_at: float | None = None
    estimated_s_left: float | None = None
    pid: int | None = None
    message: str = ""

    @property
    def is_running(self) -> bool:
        """True while the autograde is starting or running."""
        return self.state in ("starting", "running")


def progress_path(layout: CourseLayout, assignment: str) -> Path:
    """Return the progress record of ``assignment``'s autograde."""
    return layout.reports_dir / f"autograde-{assignment}.progress.json"


def launch_log_path(layout: CourseLayout, assignment: str) -> Path:
    """Return the file that receives the background autograde's output.

    Written by :func:`coursehub.grading.autograde.launch.start_autograde`; its
    last line is what an interrupted record reports.
    """
    return layout.reports_dir / f"autograde-{assignment}.log"


def estimate_time_left(elapsed_s: float, done_here: int, remaining: int) -> float | None:
    """Return the seconds left at the pace of this run so far (pure).

    ``done_here`` submissions were graded in ``elapsed_s`` seconds by this
    run (skipped ones excluded), jobs side by side included: the pace is
    ``done_here / elapsed_s``. None before the first one is done.

    >>> estimate_time_left(60.0, 10, 20)
    120.0
    """
    if remaining <= 0:
        return 0.0
    if done_here <= 0 or elapsed_s <= 0:
        return None
    return remaining * elapsed_s / done_here


def render_progress_json(progress: AutogradeProgress) -> str:
    """Return the record's JSON text (pure)."""
    return json.dumps(asdict(progress), indent=2, sort_keys=True) + "\n"


def parse_progress_json(text: str, course_id: str, assignment: str) -> AutogradeProgress:
    """Return the progress in a record's JSON text; unreadable: not started (pure)."""
    try:
        data = json.loads(text)
        failures = tuple(AutogradeFailure(**f) for f in data.pop("failures", []))
        running_now = tuple(data.pop("running_now", []))
        known = set(AutogradeProgress.__dataclass_fields__)
        data = {k: v for k, v in data.items() if k in known}
        data.update(course_id=course_id, assignment=assignment)
        return AutogradeProgress(**data, failures=failures, running_now=running_now)
    except (ValueError, TypeError, AttributeError):
        return AutogradeProgress(course_id, assignment, message="progress record unreadable")


def write_progress(layout: CourseLayout, progress: AutogradeProgress) -> Path:
    """Write the progress record atomically (the outcomes file's mode; the course folder guards
    both)."""
    return write_atomically(
        progress_path(layout, progress.assignment), render_progress_json(progress)
    )


def read_autograde_progress(course: str | CourseLayout, assignment: str) -> AutogradeProgress:
    """Return the progress of the current or last autograde of ``assignment``.

    Parameters
    ----------
    course
        A course id (its layout from ``COURSEHUB_GRADING_*``:
        :func:`coursehub.grading.layout.layout_from_env`) or a layout.
    assignment
        The nbgrader assignment id.

    Returns
    -------
    AutogradeProgress
        ``state="not-started"`` when no autograde of it ever ran;
        ``"interrupted"`` when the record says running but its process is gone.
    """
    from coursehub.grading.layout import layout_from_env

    layout = layout_from_env(course) if isinstance(course, str) else course
    try:
        text = progress_path(layout, assignment).read_text("utf-8")
    except FileNotFoundError:
        return AutogradeProgress(layout.course_id, assignment)
    progress = parse_progress_json(text, layout.course_id, assignment)
    if progress.is_running and not pid_running(progress.pid):
        return _interrupted(progress, _last_line(launch_log_path(layout, assignment)))
    return progress


def _interrupted(progress: AutogradeProgress, last_line: str) -> AutogradeProgress:
    message = (
        f"the autograde (pid {progress.pid}) stopped after {progress.graded} of "
        f"{progress.total}; start it again to continue"
    )
    if last_line:
        message += f" (its last words: {last_line})"
    return replace(
        progress, state="interrupted", running_now=(), estimated_s_left=None, message=message
    )


def _last_line(log: Path) -> str:
    """Return the last non-empty line of the background autograde's log ("" if none)."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - 4096))
            lines = handle.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return next((ln.strip()[:300] for ln in reversed(lines) if ln.strip()), "")


@contextlib.contextmanager
def progress_bar(assignment: str) -> Iterator[Callable[[Any], None]]:
    """Yield an ``on_progress`` callback drawing a tqdm bar on stderr (none when not a terminal)."""
    from tqdm import tqdm

    with tqdm(desc=f"autograde {assignment}", unit="sub", disable=None) as bar:

        def update(progress: Any) -> None:
            bar.total = progress.total
            bar.n = progress.graded
            failed = len([f for f in progress.failures if f.status != "not-on-roster"])
            bar.set_postfix(running=len(progress.running_now), failed=failed, refresh=False)
            bar.refresh()

        yield update


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM (the course page's stop, a shutdown) into KeyboardInterrupt for the block."""
    import signal

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
