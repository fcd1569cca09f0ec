"""One autograde per assignment at a time: an ``flock`` on ``coursehub/autograde-<a>.lock``.

The lock belongs to the open file description (flock(2)): the autograde
process holds it for its whole run and the kernel drops it when that process
ends, however it ends, so a crash never leaves a stale lock. The course app
takes the lock *before* it starts the detached ``coursehub grading
autograde`` process and hands the locked descriptor to it (``pass_fds`` and
:data:`LOCK_FD_VAR`); a second press of the button, or a second CLI run,
finds it held and is refused with who started the running one, when, and
its pid (written in the lock file as JSON).
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.grading.layout import CourseLayout

#: Environment variable carrying an already locked descriptor to the autograde process.
LOCK_FD_VAR = "COURSEHUB_AUTOGRADE_LOCK_FD"


class AutogradeRunningError(CoursehubError):
    """An autograde of the same assignment is already running."""


def lock_path(layout: CourseLayout, assignment: str) -> Path:
    """Return the lock file of ``assignment``'s autograde."""
    return layout.reports_dir / f"autograde-{assignment}.lock"


def render_holder(course_id: str, assignment: str, info: Mapping[str, object]) -> str:
    """Return the refusal message from the running autograde's lock-file JSON (pure)."""
    by, at, pid = info.get("by", "someone"), info.get("at", "an unknown time"), info.get("pid", "?")
    return (
        f"autograde of {assignment} (course {course_id}) is already running, "
        f"started by {by} at {at}, pid {pid}; wait for it to finish"
    )


def who_am_i(environ: Mapping[str, str] | None = None) -> str:
    """Return the hub user (``JUPYTERHUB_USER``), else the Unix user."""
    env = os.environ if environ is None else environ
    return env.get("JUPYTERHUB_USER") or getpass.getuser()


@dataclass
class AutogradeLock:
    """A held autograde lock: its open, locked descriptor and its file."""

    fd: int
    path: Path

    def describe(self, by: str, pid: int) -> None:
        """Write who holds the lock into its file (``{"by", "at", "pid"}``)."""
        at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        data = json.dumps({"by": by, "at": at, "pid": pid}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        """Close the descriptor (the lock goes once no process holds a copy)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


def acquire_autograde_lock(layout: CourseLayout, assignment: str, by: str) -> AutogradeLock:
    """Take the lock of ``assignment`` without waiting; record ``by`` and this pid.

    Raises
    ------
    AutogradeRunningError
        If another process holds it (the message names who, when and its pid).
    """
    path = lock_path(layout, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        info = _read_info(fd)
        os.close(fd)
        raise AutogradeRunningError(render_holder(layout.course_id, assignment, info)) from None
    lock = AutogradeLock(fd, path)
    lock.describe(by, os.getpid())
    return lock


def adopt_lock(
    layout: CourseLayout, environ: Mapping[str, str], assignment: str
) -> AutogradeLock | None:
    """Return the lock handed over in :data:`LOCK_FD_VAR` if it is this assignment's, else None."""
    text = environ.get(LOCK_FD_VAR, "")
    if not text.isdigit():
        return None
    fd = int(text)
    try:
        held, wanted = os.fstat(fd), os.stat(lock_path(layout, assignment))
    except OSError:
        return None
    if (held.st_dev, held.st_ino) != (wanted.st_dev, wanted.st_ino):
        return None
    try:  # same open file description: succeeds when the lock was handed over
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None
    os.set_inheritable(fd, False)
    return AutogradeLock(fd, lock_path(layout, assignment))


@contextlib.contextmanager
def autograde_lock(
    layout: CourseLayout, assignment: str, environ: Mapping[str, str] | None = None
) -> Iterator[AutogradeLock]:
    """Hold the lock of ``assignment`` (adopted from the course app, or taken) for the block.

    Raises
    ------
    AutogradeRunningError
        If another autograde of ``assignment`` holds it.
    """
    env = os.environ if environ is None else environ
    lock = adopt_lock(layout, env, assignment) or acquire_autograde_lock(
        layout, assignment, who_am_i(env)
    )
    try:
        yield lock
    finally:
        lock.release()


def _read_info(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
