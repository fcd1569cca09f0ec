"""Removing test cgroups: kill what is left inside, then ``rmdir`` children and the parent."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from helpers import wait_until


def rmdir_retrying(path: Path, timeout_s: float = 5.0) -> None:
    """Remove the empty cgroup ``path``, retrying while its killed processes exit (20 ms apart).

    Raises :class:`helpers.WaitTimeoutError` if it is still busy after ``timeout_s``.
    """
    wait_until(lambda: _try_rmdir(path), timeout_s, 0.02, what=f"removing cgroup {path}")


def _try_rmdir(path: Path) -> bool:
    """Remove ``path``; return whether it is gone (``False``: still busy)."""
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def remove_cgroup_tree(parent: Path) -> None:
    """SIGKILL every process in ``parent``'s child cgroups, then remove them and ``parent``."""
    children = [p for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    for child in children:
        for pid in (child / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        rmdir_retrying(child)
    rmdir_retrying(parent)
