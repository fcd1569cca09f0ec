"""Whether a process still runs, by pid: one answer for every part that records a pid."""

from __future__ import annotations

import psutil


def pid_running(pid: object) -> bool:
    """Return True if process ``pid`` exists and has not exited (another user's too).

    A zombie (exited, not yet reaped by its parent) counts as gone, so a
    parent that polls its own child sees the end before it reaps it.
    Anything but a positive ``int`` (a pid read from a JSON file may be
    missing or ``null``) is not a running process.

    Uses ``psutil.Process(pid).status()`` (psutil's documentation: a
    process that does not exist raises ``NoSuchProcess``; one of another
    user is still readable, or raises ``AccessDenied``, which means it exists).
    """
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False
