"""How much a student's home holds: a bounded walk of the folder, or "unknown".

The student's page (:mod:`coursehub.web.views.budgets`) shows it next to the
quota of :mod:`coursehub.homequota.plan`. The walk is ``os.scandir`` without
following links, as ``du`` counts (du(1): disk usage, the blocks of
``st_blocks`` in 512-byte units, stat(2)), and stops after
:data:`MAX_ENTRIES` entries so that a home of millions of files costs no more
than a page should; the figure is then "unknown". A home that cannot be read
(missing, permission) is "unknown" too, with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: Entries read at most per home before the size is given up as unknown.
MAX_ENTRIES = 50_000


@dataclass(frozen=True)
class HomeUsage:
    """The bytes a home uses (None: unknown, with ``reason``)."""

    used_bytes: int | None
    reason: str = ""


def home_usage(home: str | os.PathLike[str], max_entries: int = MAX_ENTRIES) -> HomeUsage:
    """Return the disk space used below ``home`` (its blocks, links not followed).

    Parameters
    ----------
    home
        The home folder.
    max_entries
        Entries read at most; past them the size is unknown.
    """
    root = Path(home)
    try:
        total = root.lstat().st_blocks * 512
    except OSError as exc:
        return HomeUsage(None, f"{root}: {exc.strerror or exc}")
    pending, seen = [root], 0
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > max_entries:
                        return HomeUsage(None, f"more than {max_entries} files")
                    info = entry.stat(follow_symlinks=False)
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
        except OSError as exc:
            return HomeUsage(None, f"{exc.filename or root}: {exc.strerror or exc}")
    return HomeUsage(total)
