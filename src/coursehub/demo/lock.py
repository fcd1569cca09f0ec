"""One ``coursehub demo`` per data directory: an ``flock`` held for the demo's lifetime.

``DATA_DIR/demo.lock`` (mode 0600) is locked with ``fcntl.flock(LOCK_EX |
LOCK_NB)`` before anything else happens in the data directory, and holds the
holder's pid and public port as JSON for the refusal message. The lock
belongs to the open file description, so it ends when the demo and its hub
(which inherits the descriptor, see :meth:`DemoLock.fileno`) have exited,
even on SIGKILL: a stale file never blocks a new demo
(https://man7.org/linux/man-pages/man2/flock.2.html).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from coursehub.errors import CoursehubError

#: Name of the lock file in the data directory.
LOCK_FILE = "demo.lock"


class DemoAlreadyRunningError(CoursehubError):
    """Another ``coursehub demo`` holds the data directory."""


def parse_lock_holder(text: str) -> tuple[int | None, int | None]:
    """Return ``(pid, port)`` read from a lock file; None for what is missing or malformed."""
    try:
        data = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    pid, port = data.get("pid"), data.get("port")
    return (
        pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        port if isinstance(port, int) and not isinstance(port, bool) else None,
    )


def render_refusal(data_dir: Path, pid: int | None, port: int | None) -> str:
    """Return the message of a second demo on ``data_dir``."""
    holder = ", ".join(
        part for part in (f"pid {pid}" if pid else "", f"port {port}" if port else "") if part
    )
    return (
        f"a coursehub demo is already running on {data_dir}"
        + (f" ({holder})" if holder else "")
        + "; stop it first"
    )


class DemoLock:
    """The held lock of one data directory; :meth:`release` (or process exit) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    def fileno(self) -> int:
        """Return the locked descriptor (pass it to the hub: ``Popen(pass_fds=...)``)."""
        return self._fd

    def release(self) -> None:
        """Close this process's descriptor (the file stays; its content no longer matters).

        No ``LOCK_UN``: that would unlock the hub's inherited descriptor too
        (one open file description); the lock ends when the last one closes.
        """
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def acquire_lock(data_dir: Path, port: int) -> DemoLock:
    """Lock ``data_dir`` for this demo and record ``(os.getpid(), port)`` in the lock file.

    Raises
    ------
    DemoAlreadyRunningError
        If another process holds the lock; the message names its pid and port.
    """
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        os.close(fd)
        raise DemoAlreadyRunningError(render_refusal(data_dir, *parse_lock_holder(text))) from None
    except BaseException:
        os.close(fd)
        raise
    os.fchmod(fd, 0o600)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "port": port}).encode(), 0)
    return DemoLock(path, fd)
