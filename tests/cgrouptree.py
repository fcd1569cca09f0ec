"""Removing test cgroups: kill what is left inside, then ``rmdir`` children and the parent."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def rmdir_retrying(path: Path, tries: int = 250) -> None:
    """Remove the empty cgroup ``path``, retrying while its killed processes exit (20 ms apart)."""
    for _ in range(tries):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    path.rmdir()


def remove_cgroup_tree(parent: Path) -> None:
    """SIGKILL every process in ``parent``'s child cgroups, then remove them and ``parent``."""
    children = [p for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    for child in children:
        for pid in (child / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        rmdir_retrying(child)
    rmdir_retrying(parent)
