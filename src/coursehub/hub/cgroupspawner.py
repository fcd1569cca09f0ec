"""Local spawners that put each single-user server in its own cgroup (v1 or v2).

For machines where systemd is not PID 1 (containers, CI, ``coursehub demo``),
where SystemdSpawner cannot run. Each server gets the cgroup
``{cgroup_parent}/jupyter-{user}[-{server}]`` with a CFS quota of
``cpu_limit`` CPUs and a memory limit of ``mem_limit`` bytes (RAM + swap),
made by :class:`coursehub.resources.JobCgroup` (REFERENCE.md section 2). The
server process joins its cgroup between ``fork`` and ``exec``, so it and every
kernel it starts are inside from their first instruction. When the server
stops, what is left inside is killed and the cgroup removed.

Where cgroups cannot be made (not root, read-only ``/sys/fs/cgroup``) the
server starts anyway and the hub logs that its limits are not enforced.

* :class:`CgroupLocalProcessSpawner`: JupyterHub's LocalProcessSpawner (one
  Unix user per hub user).
* :class:`CgroupSimpleLocalProcessSpawner`: SimpleLocalProcessSpawner (every
  server runs as the hub's own Unix user, with its home under
  ``home_dir_template``); for the demo and tests only, as it gives no
  isolation between users. When the hub runs as root it passes
  ``--allow-root`` to the server, which jupyter-server otherwise refuses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from traitlets import HasTraits, Unicode

from coursehub.resources.cgroupfs import CGROUP_ROOT, PROC_CGROUP
from coursehub.resources.cgroups import (
    CgroupUnavailableError,
    JobCgroup,
    job_cgroup_bases,
    plan_job_cgroup,
)

#: Default cgroup directory holding every server's cgroup.
SERVERS_PARENT = "coursehub-servers"


def cgroup_name_for(username: str, server_name: str = "") -> str:
    """Return the cgroup name of a server: ``jupyter-{user}[-{server}]``, one path component.

    Characters other than letters, digits, ``.``, ``_`` and ``-`` become ``_``.
    """
    raw = f"jupyter-{username}" + (f"-{server_name}" if server_name else "")
    return re.sub(r"[^A-Za-z0-9._-]", "_", raw)


class CgroupSpawnerMixin(HasTraits):
    """Put the spawned server in its own cgroup with the spawner's ``cpu_limit`` and ``mem_limit``.

    Mix in before a LocalProcessSpawner class: ``class S(CgroupSpawnerMixin,
    LocalProcessSpawner)``.
    """

    cgroup_parent = Unicode(
        SERVERS_PARENT, help="cgroup directory that holds every server's cgroup."
    ).tag(config=True)
    cgroup_root = Unicode(str(CGROUP_ROOT), help="Where the cgroup filesystems are mounted.").tag(
        config=True
    )
    proc_cgroup = Unicode(
        str(PROC_CGROUP), help="The hub's /proc/PID/cgroup file (where its own cgroups are)."
    ).tag(config=True)

    _cgroup: JobCgroup | None = None

    # attributes provided by the Spawner class this is mixed into
    user: Any
    name: str
    log: Any
    cpu_limit: float | None
    mem_limit: int | None

    @property
    def cgroup_name(self) -> str:
        """This server's cgroup name (see :func:`cgroup_name_for`)."""
        return cgroup_name_for(self.user.name, self.name or "")

    def _cgroup_paths(self) -> tuple[Path, Path]:
        return Path(self.cgroup_root), Path(self.proc_cgroup)

    def existing_cgroup(self) -> JobCgroup | None:
        """Return this server's cgroup as planned from its name (after a hub restart), or None."""
        try:
            version, cpu_base, mem_base = job_cgroup_bases(*self._cgroup_paths())
        except CgroupUnavailableError:
            return None
        plan = plan_job_cgroup(
            version, cpu_base, mem_base, self.cgroup_name, None, None, self.cgroup_parent
        )
        return JobCgroup(plan)

    def ensure_cgroup(self) -> JobCgroup | None:
        """Make this server's cgroup afresh (a stale one is emptied and removed first).

        Returns None, after logging that the limits are not enforced, where
        cgroups cannot be made here.
        """
        stale = self.existing_cgroup()
        if stale is not None:
            stale.remove()
        try:
            cgroup = JobCgroup.create(
                self.cgroup_name,
                self.cpu_limit or None,
                self.mem_limit or None,
                self.cgroup_parent,
                *self._cgroup_paths(),
            )
        except CgroupUnavailableError as exc:
            self.log.warning(
                "coursehub: %s: cgroup limits NOT enforced (cpu_limit=%s, mem_limit=%s): %s",
                self.user.name,
                self.cpu_limit,
                self.mem_limit,
                exc,
            )
            return None
        self.log.info("coursehub: %s runs in cgroup %s", self.user.name, cgroup.plan.job_dirs[0])
        return cgroup

    def remove_cgroup(self) -> None:
        """Kill what is left in this server's cgroup and remove it (no-op when absent)."""
        cgroup = self._cgroup or self.existing_cgroup()
        self._cgroup = None
        if cgroup is None:
            return
        try:
            cgroup.remove()
        except OSError as exc:
            self.log.warning("coursehub: cannot remove cgroup of %s: %s", self.user.name, exc)

    def make_preexec_fn(self, name: str) -> Callable[[], None]:
        """Wrap the parent's pre-exec function: join the cgroup first, then drop privileges."""
        inner = super().make_preexec_fn(name)  # type: ignore[misc]
        procs_files = [str(p) for p in self._cgroup.procs_files] if self._cgroup else []

        def preexec() -> None:
            pid = str(os.getpid())
            for procs in procs_files:
                with open(procs, "w") as handle:
                    handle.write(pid)
            inner()

        return preexec

    async def start(self) -> Any:
        """Make the cgroup, then start the server inside it."""
        self._cgroup = self.ensure_cgroup()
        try:
            return await super().start()  # type: ignore[misc]
        except BaseException:
            self.remove_cgroup()
            raise

    async def stop(self, now: bool = False) -> None:
        """Stop the server, then empty and remove its cgroup."""
        try:
            await super().stop(now=now)  # type: ignore[misc]
        finally:
            self.remove_cgroup()

    async def poll(self) -> int | None:
        """Poll the server; once it has exited, remove its cgroup."""
        status = await super().poll()  # type: ignore[misc]
        if status is not None and self._cgroup is not None:
            self.remove_cgroup()
        return status


class CgroupLocalProcessSpawner(CgroupSpawnerMixin, LocalProcessSpawner):
    """LocalProcessSpawner with a per-server cgroup (CPU quota, memory limit)."""


class CgroupSimpleLocalProcessSpawner(CgroupSpawnerMixin, SimpleLocalProcessSpawner):
    """SimpleLocalProcessSpawner with a per-server cgroup; demo and tests only (no isolation)."""

    def get_args(self) -> list[str]:
        """The server's arguments, plus ``--allow-root`` when the hub runs as root."""
        args = list(super().get_args())
        if os.geteuid() == 0 and "--allow-root" not in args:
            args.append("--allow-root")
        return args
