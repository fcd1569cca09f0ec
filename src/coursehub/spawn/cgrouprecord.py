"""A server's cgroup: its name, its hub's parent folder, and the record kept in the spawner state.

Pure but for ``os.stat`` (the inode numbers that tell a directory this hub
made from one made again by someone else); used by
:class:`coursehub.spawn.cgroupspawner.CgroupSpawnerMixin`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from coursehub.resources.cgroups import JobCgroupPlan
from coursehub.spawn.identity import check_hub_id

#: Default cgroup directory holding every server's cgroup (the hub id is appended).
SERVERS_PARENT = "coursehub-servers"
#: Key of this mixin's record in the spawner state.
STATE_KEY = "coursehub_cgroup"


def cgroup_name_for(username: str, server_name: str = "") -> str:
    """Return the cgroup name of a server: ``jupyter-{user}[-{server}]``, one path component.

    Characters other than letters, digits, ``.``, ``_`` and ``-`` become ``_``.
    """
    raw = f"jupyter-{username}" + (f"-{server_name}" if server_name else "")
    return re.sub(r"[^A-Za-z0-9._-]", "_", raw)


def servers_parent_for(parent: str, hub_id: str) -> str:
    """Return the directory holding one hub's server cgroups: ``{parent}-{hub_id}``."""
    return f"{parent}-{check_hub_id(hub_id)}"


def record_cgroup(hub_id: str, plan: JobCgroupPlan) -> dict[str, Any]:
    """Return the state record of a cgroup this hub made: its dirs and their inode numbers."""
    dirs = [str(d) for d in plan.job_dirs]
    return {
        "hub_id": hub_id,
        "version": plan.version,
        "dirs": dirs,
        "inodes": [os.stat(d).st_ino for d in dirs],
    }


def recorded_plan(record: Any, hub_id: str) -> JobCgroupPlan | None:
    """Return the plan of the cgroup ``record`` describes, if it is this hub's and still there.

    A directory counts only when it exists with the recorded inode number (a
    directory removed and made again by someone else has another one).
    Returns None for a record of another hub id, or when no directory is left.
    """
    if not isinstance(record, dict) or record.get("hub_id") != hub_id:
        return None
    kept = []
    for directory, inode in zip(record.get("dirs", []), record.get("inodes", []), strict=False):
        try:
            if os.stat(directory).st_ino == inode:
                kept.append(Path(directory))
        except OSError:
            continue
    if not kept:
        return None
    return JobCgroupPlan(int(record.get("version", 1)), tuple(kept), ())
