"""The cgroup spawners' usage hooks: open a server's unit when its cgroup is made, close it at stop.

Called by :class:`coursehub.spawn.cgroupspawner.CgroupSpawnerMixin` with
itself as ``spawner`` (JupyterHub's ``Spawner``: ``user.name``, ``name``,
``user_options``, ``runtime_dir``, ``hub_id``, ``visible_gpus``,
``environment``). The usage folder is ``$COURSEHUB_USAGE_DIR`` of the hub
process, else ``<runtime_dir>/usage``. Accounting never stops a server: an
error is logged and the server runs unaccounted.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from coursehub.meter.cgroupread import add_cpuacct
from coursehub.meter.journal import USAGE_DIR_VAR
from coursehub.meter.sampler import (
    COURSE_VAR,
    ensure_job_folder,
    hub_sampler,
    job_folder,
    usage_folder,
)
from coursehub.resources.cgroups import JobCgroup

log = logging.getLogger(__name__)

#: Attribute of the spawner holding its open unit id.
UNIT_ATTR = "_coursehub_usage_unit"
#: A spawner class attribute, True where every server runs as the hub's own
#: account (the demo's): the jobs' folder need not be in other users' reach.
SHARES_HUB_ACCOUNT_ATTR = "shares_hub_account"


def server_unit_id(hub_id: str, user: str, server_name: str, started_at: float) -> str:
    """Return a server's unit id: ``server:<hub id>:<user>:<server name>:<start, ms>``."""
    return f"server:{hub_id}:{user}:{server_name}:{round(started_at * 1000)}"


def open_server_usage(spawner: Any, cgroup: JobCgroup) -> JobCgroup:
    """Start accounting ``spawner``'s server in ``cgroup``; return the cgroup to use.

    On cgroup v1 with ``cpuacct`` apart from ``cpu`` the returned cgroup has
    one more directory (:func:`coursehub.meter.cgroupread.add_cpuacct`), which
    the server's pid joins like the others. The server's environment gets
    ``COURSEHUB_COURSE_ID`` so that its runner jobs name their course, and
    ``COURSEHUB_USAGE_DIR``: the jobs' usage folder (:func:`job_folder`, made
    here), where its runner jobs write their records while they run; where
    the students' jobs cannot reach it (:func:`ensure_job_folder`) the hub
    log says so and the server gets no ``COURSEHUB_USAGE_DIR``.
    """
    try:
        cgroup = JobCgroup(
            add_cpuacct(cgroup.plan, Path(spawner.cgroup_root), Path(spawner.proc_cgroup))
        )
        folder = usage_folder(Path(spawner.runtime_dir) / "usage")
        assert folder is not None
        course_id = str((spawner.user_options or {}).get("course") or "")
        unit_id = server_unit_id(spawner.hub_id, spawner.user.name, spawner.name or "", time.time())
        n_gpus = len(getattr(spawner, "visible_gpus", None) or ())
        hub_sampler(folder, spawner.hub_id).open(
            unit_id,
            "server",
            spawner.user.name,
            course_id,
            cgroup.plan.version,
            cgroup.plan.job_dirs,
            n_gpus,
        )
        setattr(spawner, UNIT_ATTR, (folder, unit_id))
        spawner.environment = {**spawner.environment, **job_usage_env(spawner, folder)}
    except Exception as exc:  # accounting must never stop a server
        log.warning("coursehub: usage of %s not recorded: %s", spawner.user.name, exc)
    return cgroup


def job_usage_env(spawner: Any, folder: Path | str) -> dict[str, str]:
    """Return the server environment that meters its runner jobs (never raises).

    ``COURSEHUB_COURSE_ID`` (the server's course, so that its jobs name it)
    and ``COURSEHUB_USAGE_DIR``: the jobs' folder next to the usage folder
    ``folder`` (``$COURSEHUB_USAGE_DIR`` of the hub wins, :func:`usage_folder`;
    :func:`job_folder`, made here by :func:`ensure_job_folder`). Where the
    students' jobs cannot reach it the hub log says so and that variable is
    left out (the jobs run unmetered).
    """
    course_id = str((spawner.user_options or {}).get("course") or "")
    env = {COURSE_VAR: course_id} if course_id else {}
    try:
        base = usage_folder(Path(folder))
        assert base is not None
        reach_users = not getattr(spawner, SHARES_HUB_ACCOUNT_ATTR, False)
        env[USAGE_DIR_VAR] = str(ensure_job_folder(job_folder(base), reach_users))
    except OSError as exc:
        log.warning("coursehub: runner jobs of %s not metered: %s", spawner.user.name, exc)
    return env


def close_server_usage(spawner: Any, exit_reason: str = "stopped") -> None:
    """Write the closing record of ``spawner``'s server (a no-op when none is open)."""
    opened = getattr(spawner, UNIT_ATTR, None)
    if not opened:
        return
    setattr(spawner, UNIT_ATTR, None)
    folder, unit_id = opened
    try:
        hub_sampler(folder, spawner.hub_id).close(unit_id, exit_reason)
    except Exception as exc:  # accounting must never stop a server's removal
        log.warning("coursehub: usage of %s not closed: %s", spawner.user.name, exc)
