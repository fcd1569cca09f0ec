"""Local spawners that put each single-user server in its own cgroup (v1 or v2).

For machines where systemd is not PID 1 (containers, CI, ``coursehub demo``), where
SystemdSpawner cannot run. Each server gets the cgroup
``{cgroup_parent}-{hub_id}/jupyter-{user}[-{server}]`` with a CFS quota of ``cpu_limit`` CPUs
and a memory limit of ``mem_limit`` bytes (RAM + swap), made by
:class:`coursehub.resources.cgroups.JobCgroup` (Linux kernel documentation:
``Documentation/admin-guide/cgroup-v1/`` and ``cgroup-v2.rst`` for the controllers,
``Documentation/scheduler/sched-bwc.rst`` for the CFS quota), and on cgroup v1 a devices cgroup
that lets it open only its own GPUs (:mod:`coursehub.spawn.devices`). The server process joins
its cgroups between ``fork`` and ``exec``, so it and every kernel it starts are inside from
their first instruction. When the server stops, what is left inside is killed and the cgroups
removed.

Several hubs on one host: the ``hub_id`` (:mod:`coursehub.spawn.identity`, a hash of the hub's
database) is in the cgroup path; a host-wide lock per hub id stops two live hubs sharing one.
The cgroups' directories (and inodes) are kept in the spawner's state: one found at the planned
path is emptied only when this hub recorded it; any other is left alone, logged, with its
processes, and the server gets a fresh name.

Where cgroups cannot be made (not root, read-only ``/sys/fs/cgroup``) the server starts anyway
and the hub logs that its limits are not enforced. GPUs differ (``device_isolation``): NVIDIA
devices that cannot be hidden (cgroup v2, no devices controller, no cgroups) refuse the server
by default (``"required"``), or start it with a warning (``"best-effort"``).

* :class:`CgroupLocalProcessSpawner`: JupyterHub's LocalProcessSpawner (a Unix user each).
* :class:`CgroupSimpleLocalProcessSpawner`: SimpleLocalProcessSpawner (every server runs as the
  hub's own Unix user, home under ``home_dir_template``): demo and tests only, no isolation
  between users; a hub running as root passes ``--allow-root``, else refused by jupyter-server.

Both keep an exam server's exam home as its ``HOME`` (:mod:`coursehub.spawn.examhome`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from tornado import web
from traitlets import Enum, HasTraits, Int, List, Unicode, default, validate

from coursehub.meter.hubhook import close_server_usage, open_server_usage
from coursehub.meter.records import with_oom_kills
from coursehub.resources.cgroupfs import CGROUP_ROOT, PROC_CGROUP, locate_controller
from coursehub.resources.cgroups import (
    CgroupStats,
    CgroupUnavailableError,
    JobCgroup,
    JobCgroupPlan,
    job_cgroup_bases,
    plan_job_cgroup,
)
from coursehub.spawn.cgrouprecord import (
    SERVERS_PARENT,
    STATE_KEY,
    cgroup_name_for,
    record_cgroup,
    recorded_plan,
    servers_parent_for,
)
from coursehub.spawn.devices import parse_proc_devices, plan_device_rules
from coursehub.spawn.examhome import ExamHomeMixin
from coursehub.spawn.identity import (
    HubIdentityError,
    HubLock,
    check_hub_id,
    default_runtime_dir,
    hub_id_from_config,
)
from coursehub.spawn.oomreason import cgroup_memory_state, server_oom_reason
from coursehub.spawn.serverexit import ServerExitWatchMixin


class CgroupSpawnerMixin(HasTraits):
    """Put the spawned server in its own cgroup with the spawner's ``cpu_limit`` and ``mem_limit``.

    Mix in before a LocalProcessSpawner class: ``class S(CgroupSpawnerMixin, LocalProcessSpawner)``.
    """

    cgroup_parent = Unicode(
        SERVERS_PARENT,
        help="cgroup directory that holds every server's cgroup; the hub id is appended.",
    ).tag(config=True)
    hub_id = Unicode(
        help="This hub's id in host-wide names (default: a hash of JupyterHub.db_url, "
        "see coursehub.spawn.identity); 1-40 letters, digits, '.', '_', '-'."
    ).tag(config=True)
    runtime_dir = Unicode(
        help="Directory of the host-wide hub lock files (default: /run/coursehub as root)."
    ).tag(config=True)
    cgroup_root = Unicode(str(CGROUP_ROOT), help="Where cgroups are mounted.").tag(config=True)
    proc_cgroup = Unicode(
        str(PROC_CGROUP), help="The hub's /proc/PID/cgroup file (where its own cgroups are)."
    ).tag(config=True)
    proc_devices = Unicode("/proc/devices", help="The host's device majors (man 5 proc).").tag(
        config=True
    )
    visible_gpus = List(
        Int(),
        help="GPU indices (/dev/nvidiaN) the server may open; set by the course profile. "
        "Every other NVIDIA device is hidden (cgroup v1 devices controller).",
    ).tag(config=True)
    device_isolation = Enum(
        ("required", "best-effort"),
        "required",
        help="Where NVIDIA devices exist but cannot be hidden (cgroup v2, no devices "
        "controller): 'required' refuses the server, 'best-effort' starts it with a warning.",
    ).tag(config=True)

    _cgroup: JobCgroup | None = None
    _cgroup_record: dict[str, Any] | None = None
    _exit_stats: CgroupStats | None = None
    #: Why the server last stopped, when coursehub knows (an OOM kill), for the hub's pages.
    stop_reason: str | None = None

    # attributes provided by the Spawner class this is mixed into
    user: Any
    name: str
    log: Any
    config: Any
    cpu_limit: float | None
    mem_limit: int | None

    @default("hub_id")
    def _default_hub_id(self) -> str:
        return hub_id_from_config(self.config)

    @validate("hub_id")
    def _check_hub_id(self, proposal: Any) -> str:
        return check_hub_id(str(proposal["value"]))

    @default("runtime_dir")
    def _default_runtime_dir(self) -> str:
        return default_runtime_dir()

    @property
    def cgroup_name(self) -> str:
        """This server's cgroup name (see :func:`cgroup_name_for`)."""
        return cgroup_name_for(self.user.name, self.name or "")

    @property
    def servers_parent(self) -> str:
        """This hub's directory of server cgroups (:func:`servers_parent_for`)."""
        return servers_parent_for(self.cgroup_parent, self.hub_id)

    def _cgroup_paths(self) -> tuple[Path, Path]:
        return Path(self.cgroup_root), Path(self.proc_cgroup)

    def load_state(self, state: dict[str, Any]) -> None:
        """Load the parent's state and the record of this server's cgroup."""
        super().load_state(state)  # type: ignore[misc]
        record = state.get(STATE_KEY)
        self._cgroup_record = record if isinstance(record, dict) else None

    def get_state(self) -> dict[str, Any]:
        """Return the parent's state with the record of this server's cgroup."""
        state: dict[str, Any] = super().get_state()  # type: ignore[misc]
        if self._cgroup_record:
            state[STATE_KEY] = self._cgroup_record
        return state

    def clear_state(self) -> None:
        """Forget the parent's state and the cgroup record."""
        super().clear_state()  # type: ignore[misc]
        self._cgroup_record = None

    def existing_cgroup(self) -> JobCgroup | None:
        """Return this server's cgroup as recorded in its state (after a hub restart), or None."""
        plan = recorded_plan(self._cgroup_record, self.hub_id)
        return JobCgroup(plan) if plan else None

    def _planned_dirs(self, name: str) -> list[Path]:
        try:
            version, cpu_base, mem_base = job_cgroup_bases(*self._cgroup_paths())
        except CgroupUnavailableError:
            return []
        plan = plan_job_cgroup(version, cpu_base, mem_base, name, None, None, self.servers_parent)
        dirs = list(plan.job_dirs)
        with contextlib.suppress(CgroupUnavailableError):
            dirs.append(self._devices_base() / self.servers_parent / name)
        return [d for d in dirs if d.is_dir()]

    def _free_cgroup_name(self) -> str:
        """Return a cgroup name with no directory left, emptying only this hub's own leftover."""
        own = self.existing_cgroup()
        if own is not None:
            own.remove()  # this hub made it: what is left inside is this hub's
            self._cgroup_record = None
        name = self.cgroup_name
        found = self._planned_dirs(name)
        if not found:
            return name
        stranger = JobCgroup(JobCgroupPlan(1, tuple(found), ()))
        pids = sorted(stranger.pids())
        if not pids:
            with contextlib.suppress(OSError):
                for directory in found:
                    directory.rmdir()
                return name
        fresh = f"{name}.{secrets.token_hex(3)}"
        self.log.warning(
            "coursehub: %s: cgroup %s was not made by this hub (id %s) and holds pids %s: "
            "left alone; this server uses cgroup %s",
            self.user.name,
            found[0],
            self.hub_id,
            pids or "none",
            fresh,
        )
        return fresh

    def ensure_cgroup(self) -> JobCgroup | None:
        """Make this server's cgroups (cpu, memory, devices) afresh.

        Returns None, after logging that the limits are not enforced, where
        cgroups cannot be made here.

        Raises
        ------
        tornado.web.HTTPError
            500 if another live hub has this hub's id, or (``device_isolation =
            "required"``) NVIDIA devices exist and cannot be hidden.
        """
        try:
            HubLock.acquire(self.hub_id, self.runtime_dir)
        except (HubIdentityError, OSError) as exc:
            self.log.error("coursehub: %s: %s", self.user.name, exc)
            raise web.HTTPError(500, f"this hub cannot start servers: {exc}") from exc
        name = self._free_cgroup_name()
        try:
            cgroup = JobCgroup.create(
                name,
                self.cpu_limit or None,
                self.mem_limit or None,
                self.servers_parent,
                *self._cgroup_paths(),
            )
        except CgroupUnavailableError as exc:
            self._devices_not_hidden(str(exc))
            self.log.warning(
                "coursehub: %s: cgroup limits NOT enforced (cpu_limit=%s, mem_limit=%s): %s",
                self.user.name,
                self.cpu_limit,
                self.mem_limit,
                exc,
            )
            return None
        try:
            cgroup = self._add_devices(cgroup, name)
        except (CgroupUnavailableError, OSError) as exc:
            try:
                self._devices_not_hidden(str(exc))
            except web.HTTPError:
                try:
                    cgroup.remove()
                except OSError as error:
                    self.log.warning("coursehub: cannot remove cgroup %s: %s", name, error)
                raise
        cgroup = open_server_usage(self, cgroup)
        self._cgroup_record = record_cgroup(self.hub_id, cgroup.plan)
        self.log.info("coursehub: %s runs in cgroup %s", self.user.name, cgroup.plan.job_dirs[0])
        return cgroup

    def _devices_base(self) -> Path:
        mount = locate_controller("devices", *self._cgroup_paths())
        if mount is None or mount.version != 1:
            raise CgroupUnavailableError(
                "no cgroup v1 devices controller (on cgroup v2 device access is an eBPF "
                "program that only systemd sets up here: use SystemdSpawner)"
            )
        own = mount.own_dir()
        if own.is_dir() and os.access(own, os.W_OK):
            return own
        if not os.access(mount.mount, os.W_OK):
            raise CgroupUnavailableError(f"cgroup directory {mount.mount} is not writable")
        return mount.mount

    def _char_devices(self) -> dict[str, int]:
        try:
            return parse_proc_devices(Path(self.proc_devices).read_text())
        except OSError:
            return {}

    def _add_devices(self, cgroup: JobCgroup, name: str) -> JobCgroup:
        """Add a devices cgroup that lets the server open only its ``visible_gpus``."""
        directory = self._devices_base() / self.servers_parent / name
        rules = plan_device_rules(self.visible_gpus, self._char_devices())
        directory.mkdir(parents=True)
        try:
            for rule in rules:
                (directory / rule.file).write_text(rule.rule)
        except OSError:
            directory.rmdir()
            raise
        dirs = (*cgroup.plan.job_dirs, directory)
        return JobCgroup(dataclasses.replace(cgroup.plan, job_dirs=dirs))

    def _devices_not_hidden(self, reason: str) -> None:
        """Refuse (``required``) or warn: GPUs exist here and this server's cannot be hidden."""
        if not any(device.startswith("nvidia") for device in self._char_devices()):
            self.log.info("coursehub: %s: no NVIDIA driver loaded, no GPU to hide", self.user.name)
            return
        message = f"GPU isolation NOT enforced for {self.user.name}: {reason}"
        if self.device_isolation == "required":
            self.log.error("coursehub: %s", message)
            raise web.HTTPError(
                500,
                f"{message}; the administrator can use SystemdSpawner, a cgroup v1 host, or "
                "set device_isolation = 'best-effort'",
            )
        self.log.warning("coursehub: %s", message)

    def remove_cgroup(self) -> None:
        """Kill what is left in this server's cgroups and remove them (no-op when absent).

        Only a cgroup this hub made is touched: the one in memory, or the one
        recorded in the state with the same inode numbers.
        """
        cgroup = self._cgroup or self.existing_cgroup()
        self._cgroup = None
        self._cgroup_record = None
        if cgroup is None:
            return
        close_server_usage(self, with_oom_kills("stopped", cgroup.stats().oom_kills))
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
        self.stop_reason = None
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
        """Poll the server; once it has exited, keep its cgroup's counters and remove it."""
        status = await super().poll()  # type: ignore[misc]
        if status is not None and self._cgroup is not None:
            self._exit_stats = self._cgroup.stats()
            state = cgroup_memory_state(self._exit_stats, self.mem_limit)
            self.stop_reason = server_oom_reason(status, state)  # shown by the hub's pages
            if self.stop_reason:
                self.log.warning("coursehub: %s: %s", self.user.name, self.stop_reason)
            self.remove_cgroup()
        return status


class CgroupLocalProcessSpawner(
    ExamHomeMixin, ServerExitWatchMixin, CgroupSpawnerMixin, LocalProcessSpawner
):
    """LocalProcessSpawner with a per-server cgroup (CPU quota, memory limit)."""


class CgroupSimpleLocalProcessSpawner(
    ExamHomeMixin, ServerExitWatchMixin, CgroupSpawnerMixin, SimpleLocalProcessSpawner
):
    """SimpleLocalProcessSpawner with a per-server cgroup; demo and tests only (no isolation)."""

    #: Every server runs as the hub's account (coursehub.meter.hubhook).
    shares_hub_account = True

    def get_args(self) -> list[str]:
        """The server's arguments, plus ``--allow-root`` when the hub runs as root."""
        args = list(super().get_args())
        if os.geteuid() == 0 and "--allow-root" not in args:
            args.append("--allow-root")
        return args
