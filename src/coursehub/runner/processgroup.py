"""Signalling a job's process group (its own session: pgid = its pid), and waiting on it."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` (default SIGKILL) to process group ``pgid``; a group already gone is no error.

    A group the caller may not signal (another user's, after pid reuse) is left alone.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def sleep_unless_exit(pid: int, timeout_s: float) -> None:
    """Sleep ``timeout_s``, waking as soon as ``pid`` exits (a pidfd, Linux 5.3+).

    The exit is seen at once however long the sampling interval, so a job's
    slots come back without waiting for the next sample; where pidfds are
    unavailable it is a plain sleep.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd_open, or already reaped
        time.sleep(timeout_s)
        return
    try:
        select.select([pidfd], [], [], timeout_s)
    finally:
        os.close(pidfd)
