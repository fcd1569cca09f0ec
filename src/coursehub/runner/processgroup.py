"""Signalling a job's process group (the job runs in its own session: pgid = its pid)."""

from __future__ import annotations

import contextlib
import os
import signal


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` (default SIGKILL) to process group ``pgid``; a group already gone is no error.

    A group the caller may not signal (another user's, after pid reuse) is left alone.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
