"""The cgroup spawners' usage hooks: open a server's unit when its cgroup is made, close it at stop.

Called by :class:`coursehub.spawn.cgroupspawner.CgroupSpawnerMixin` with
itself as ``spawner`` (JupyterHub's ``Spawner``: ``user.name``, ``name``,
``user_options``, ``runtime_dir``, ``hub_id``, ``visible_gpus``,
``environment``). The usage folder is ``$COURSEHUB_USAGE_DIR`` of the hub
process, else ``<runtime_dir>/usage-<hub id>`` (:func:`hub_usage_dir`, which
the rendered hub configuration gives its usage ingester too). Accounting never stops a server: an
error is logged and the server runs unaccounted.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from coursehub.meter.cgroupread import add_cpuacct
from coursehub.meter.journal import USAGE_DIR_VAR, hub_usage_folder
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
#: account (the demo's): its jobs write to the hub's own folder (:func:`jobs_usage_dir`).
SHARES_HUB_ACCOUNT_ATTR = "shares_hub_account"


def server_unit_id(hub_id: str, user: str, server_name: str, started_at: float) -> str:
    """Return a server's unit id: ``server:<hub id>:<user>:<server name>:<start, ms>``."""
    return f"server:{hub_id}:{user}:{server_name}:{round(started_at * 1000)}"


def hub_usage_dir(runtime_dir: str | os.PathLike[str], hub_id: str) -> Path:
    """Return the usage folder of the hub ``hub_id``: ``$COURSEHUB_USAGE_DIR``, else its own.

    Its own is ``<runtime_dir>/usage-<hub id>``
    (:func:`coursehub.meter.journal.hub_usage_folder`): never another hub's.
    """
    folder = usage_folder(hub_usage_folder(runtime_dir, hub_id))
    assert folder is not None  # a default was given
    return folder


def open_server_usage(spawner: Any, cgroup: JobCgroup) -> JobCgroup:
    """Start accounting ``spawner``'s server in ``cgroup``; return the cgroup to use.

    On cgroup v1 with ``cpuacct`` apart from ``cpu`` the returned cgroup has
    one more directory (:func:`coursehub.meter.cgroupread.add_cpuacct`), which
    the server's pid joins like the others. The server's environment gets
    ``COURSEHUB_COURSE_ID`` so that its runner jobs name their course, and
    ``COURSEHUB_USAGE_DIR``: where its runner jobs write their records while
    they run (:func:`jobs_usage_dir`); where the students' jobs cannot reach
    it the server gets no ``COURSEHUB_USAGE_DIR``. The course is
    ``user_options["course"]``, which :class:`coursehub.spawn.spawner.CourseProfiles`
    sets to the course of the profile (a student of one course has no spawn form).
    """
    try:
        cgroup = JobCgroup(
            add_cpuacct(cgroup.plan, Path(spawner.cgroup_root), Path(spawner.proc_cgroup))
        )
        folder = hub_usage_dir(spawner.runtime_dir, spawner.hub_id)
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


def job_usage_env(spawner: Any, folder: Path) -> dict[str, str]:
    """Return the server environment that meters its runner jobs (never raises).

    ``COURSEHUB_COURSE_ID`` (the server's course, so that its jobs name it)
    and ``COURSEHUB_USAGE_DIR``: where its jobs write their records
    (:func:`jobs_usage_dir`, next to the hub's usage folder ``folder``,
    :func:`hub_usage_dir`). Where the students' jobs cannot reach it that
    variable is left out (the jobs run unmetered, and the hub log says so).
    """
    course_id = str((spawner.user_options or {}).get("course") or "")
    env = {COURSE_VAR: course_id} if course_id else {}
    jobs = jobs_usage_dir(spawner, folder)
    if jobs is not None:
        env[USAGE_DIR_VAR] = str(jobs)
    return env


def jobs_usage_dir(spawner: Any, folder: Path) -> Path | None:
    """Return where the runner jobs of ``spawner``'s server write their records (None: nowhere).

    Servers run as the students' own accounts: the jobs' folder
    (:func:`job_folder`, made here), whose files the ingest reads as their
    owners'. Servers run as the hub's own account (the demo's,
    :data:`SHARES_HUB_ACCOUNT_ATTR`): the hub's folder itself, since that
    account writes there anyway; their records name the hub user
    (``$JUPYTERHUB_USER``, :func:`coursehub.meter.sampler.job_user`), which a
    file of a shared account cannot vouch for in a folder users write to.
    Where the students' jobs cannot reach the jobs' folder
    (:func:`ensure_job_folder`) the hub log says so.
    """
    if getattr(spawner, SHARES_HUB_ACCOUNT_ATTR, False):
        return folder
    try:
        return ensure_job_folder(job_folder(folder))
    except OSError as exc:
        log.warning("coursehub: runner jobs of %s not metered: %s", spawner.user.name, exc)
        return None


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
