"""Per-job cgroups: a CPU quota and a memory limit around one job, then its statistics.

Where job cgroups go (decided by :func:`job_cgroup_bases`, written by
:func:`plan_job_cgroup`, carried out by :class:`JobCgroup`):

* cgroup v1: under ``PARENT/`` beneath the process's own cgroup of each
  controller when that directory is writable (so a job never escapes the
  limits of the session that started it, e.g. a nested memory cgroup such as
  ``/process_api/<id>``), else beneath the controller's root. Files:
  ``cpu.cfs_period_us``, ``cpu.cfs_quota_us``, ``memory.limit_in_bytes`` and
  ``memory.memsw.limit_in_bytes`` (Linux Documentation/admin-guide/cgroup-v1/
  cgroups.rst and memory.rst; the quota: Documentation/scheduler/sched-bwc.rst).
* cgroup v2: under ``ROOT/PARENT/``; the "no internal processes" rule forbids
  enabling controllers below a cgroup that holds processes, which the
  process's own cgroup does. ``+cpu +memory`` is written to each
  ``cgroup.subtree_control`` on the way, then ``cpu.max`` and ``memory.max``
  (Linux Documentation/admin-guide/cgroup-v2.rst).

Swap: the limit covers RAM and swap together (v1 ``memory.memsw.limit_in_bytes``
= the limit; v2 ``memory.swap.max`` = 0), as SystemdSpawner users set
``MemorySwapMax=0``: otherwise a job over its limit swaps instead of being
stopped. These writes are optional (the files exist only with swap accounting).

Where systemd is PID 1 it owns the tree; :func:`systemd_run_command` builds
the ``systemd-run --scope`` command that does the same through systemd.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.resources.cgroupfs import (
    CGROUP_ROOT,
    PROC_CGROUP,
    CgroupMount,
    locate_controller,
    read_value,
)

#: CFS period in microseconds (the kernel's default, 100 ms).
CFS_PERIOD_US = 100_000
#: Default name of the cgroup that holds every job cgroup.
JOBS_PARENT = "coursehub"


class CgroupUnavailableError(CoursehubError):
    """No job cgroup can be made here (not root, read-only or missing cgroup filesystem)."""


@dataclass(frozen=True)
class CgroupWrite:
    """Write ``value`` to ``path``; an optional write may fail (file absent) without harm."""

    path: Path
    value: str
    optional: bool = False


@dataclass(frozen=True)
class JobCgroupPlan:
    """Everything needed to make one job cgroup.

    Attributes
    ----------
    version
        1 or 2.
    job_dirs
        The job's own directories (one per v1 controller, one on v2).
    writes
        Files to write in order, after the directories exist.
    """

    version: int
    job_dirs: tuple[Path, ...]
    writes: tuple[CgroupWrite, ...]


@dataclass(frozen=True)
class CgroupStats:
    """Counters of a job cgroup.

    Attributes
    ----------
    nr_throttled
        CFS periods in which the job was throttled.
    throttled_s
        Total time throttled, in seconds.
    mem_peak_bytes
        Peak memory charged (v1 ``memory.max_usage_in_bytes``, v2
        ``memory.peak``, kernel >= 5.19); None if unknown.
    oom_kills
        Processes killed by the OOM killer inside the group; None if the
        kernel does not say (v1 before 4.13).
    mem_limit_hits
        Times the limit was reached (v1 ``memory.failcnt``, v2 ``max`` in
        ``memory.events``), including hits resolved by reclaim.
    """

    nr_throttled: int = 0
    throttled_s: float = 0.0
    mem_peak_bytes: int | None = None
    oom_kills: int | None = None
    mem_limit_hits: int = 0


def plan_job_cgroup(
    version: int,
    cpu_base: Path,
    mem_base: Path,
    name: str,
    cpu_limit: float | None,
    mem_limit: int | None,
    parent: str = JOBS_PARENT,
) -> JobCgroupPlan:
    """Return the directories and writes that make the job cgroup ``parent/name``.

    Parameters
    ----------
    version
        1 or 2 (on v2 ``cpu_base`` and ``mem_base`` must be the same directory).
    cpu_base, mem_base
        Directories under which ``parent/name`` is created.
    name
        Job cgroup name (a single path component).
    cpu_limit
        CPUs (CFS quota = ``cpu_limit * CFS_PERIOD_US``), or None for no quota.
    mem_limit
        Bytes of RAM + swap, or None for no limit.
    parent
        Directory holding all job cgroups.
    """
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"job cgroup name must be one path component, got {name!r}")
    quota = None if cpu_limit is None else max(1000, round(cpu_limit * CFS_PERIOD_US))
    if version == 1:
        cpu_dir, mem_dir = cpu_base / parent / name, mem_base / parent / name
        writes = [CgroupWrite(cpu_dir / "cpu.cfs_period_us", str(CFS_PERIOD_US))]
        if quota is not None:
            writes.append(CgroupWrite(cpu_dir / "cpu.cfs_quota_us", str(quota)))
        if mem_limit is not None:
            writes.append(CgroupWrite(mem_dir / "memory.limit_in_bytes", str(mem_limit)))
            writes.append(
                CgroupWrite(mem_dir / "memory.memsw.limit_in_bytes", str(mem_limit), optional=True)
            )
        return JobCgroupPlan(1, (cpu_dir, mem_dir), tuple(writes))
    job_dir = cpu_base / parent / name
    writes = [
        CgroupWrite(d / "cgroup.subtree_control", "+cpu +memory")
        for d in (cpu_base, cpu_base / parent)
    ]
    if quota is not None:
        writes.append(CgroupWrite(job_dir / "cpu.max", f"{quota} {CFS_PERIOD_US}"))
    if mem_limit is not None:
        writes.append(CgroupWrite(job_dir / "memory.max", str(mem_limit)))
        writes.append(CgroupWrite(job_dir / "memory.swap.max", "0", True))
    return JobCgroupPlan(2, (job_dir,), tuple(writes))


def job_cgroup_bases(
    cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP
) -> tuple[int, Path, Path]:
    """Return ``(version, cpu_base, mem_base)``: where job cgroups can be made here.

    Raises
    ------
    CgroupUnavailableError
        If the cpu and memory controllers are not both mounted and writable.
    """
    cpu = locate_controller("cpu", cgroup_root, proc_cgroup)
    mem = locate_controller("memory", cgroup_root, proc_cgroup)
    if cpu is None or mem is None or cpu.version != mem.version:
        raise CgroupUnavailableError(f"no cpu and memory cgroup controllers under {cgroup_root}")
    if cpu.version == 2:
        return 2, _writable(cpu.mount), _writable(cpu.mount)
    return 1, _v1_base(cpu), _v1_base(mem)


def systemd_available() -> bool:
    """Return True where systemd is PID 1 (``/run/systemd/system`` exists) with ``systemd-run``."""
    return Path("/run/systemd/system").is_dir() and shutil.which("systemd-run") is not None


def systemd_run_command(
    argv: list[str], unit: str, cpu_limit: float | None, mem_limit: int | None
) -> list[str]:
    """Return the ``systemd-run --scope`` command that runs ``argv`` with the given limits.

    ``CPUQuota`` is a percentage of one CPU (``cpu_limit=2`` -> ``200%``);
    ``MemoryMax`` is in bytes, with ``MemorySwapMax=0`` so the limit covers
    swap (systemd.resource-control(5)). The scope execs ``argv`` in place, so
    the pid started is the job's.
    """
    command = ["systemd-run", "--scope", "--quiet", f"--unit={unit}"]
    if cpu_limit is not None:
        command += ["-p", f"CPUQuota={max(1, round(cpu_limit * 100))}%"]
    if mem_limit is not None:
        command += ["-p", f"MemoryMax={mem_limit}", "-p", "MemorySwapMax=0"]
    return [*command, "--", *argv]


class JobCgroup:
    """A job cgroup made from a :class:`JobCgroupPlan`: add pids, read counters, remove.

    Use :meth:`create`; call :meth:`remove` when the job has ended (it kills
    what is left inside, then removes the directories).
    """

    def __init__(self, plan: JobCgroupPlan) -> None:
        self.plan = plan

    @classmethod
    def create(
        cls,
        name: str,
        cpu_limit: float | None,
        mem_limit: int | None,
        parent: str = JOBS_PARENT,
        cgroup_root: Path = CGROUP_ROOT,
        proc_cgroup: Path = PROC_CGROUP,
    ) -> JobCgroup:
        """Make the job cgroup ``parent/name`` with a CPU quota and a memory limit.

        Raises
        ------
        CgroupUnavailableError
            If the cgroup cannot be made; nothing is left behind.
        """
        version, cpu_base, mem_base = job_cgroup_bases(cgroup_root, proc_cgroup)
        plan = plan_job_cgroup(version, cpu_base, mem_base, name, cpu_limit, mem_limit, parent)
        created: list[Path] = []
        try:
            for directory in plan.job_dirs:
                _make_dir(directory)
                created.append(directory)
            for write in plan.writes:
                _apply_write(write)
        except OSError as exc:
            cls(dataclasses.replace(plan, job_dirs=tuple(created))).remove()
            raise CgroupUnavailableError(f"cannot set up cgroup {name}: {exc}") from exc
        return cls(plan)

    @property
    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a pid is written to, one per directory."""
        return [d / "cgroup.procs" for d in self.plan.job_dirs]

    def add_pid(self, pid: int) -> None:
        """Move process ``pid`` (and, from then on, its new children) into the job cgroup."""
        for procs in self.procs_files:
            procs.write_text(str(pid))

    def pids(self) -> set[int]:
        """Return the processes inside the job cgroup."""
        found: set[int] = set()
        for procs in self.procs_files:
            text = read_value(procs) or ""
            found.update(int(p) for p in text.split())
        return found

    def read(self, filename: str) -> str | None:
        """Return the stripped text of one of the job's cgroup files, found in any directory."""
        for directory in self.plan.job_dirs:
            if (directory / filename).exists():
                return read_value(directory / filename)
        return None

    def stats(self) -> CgroupStats:
        """Return the throttling, memory peak and OOM counters (zeros where unreadable)."""
        cpu_stat = _parse_keyed(self.read("cpu.stat") or "")
        if self.plan.version == 1:
            oom = _parse_keyed(self.read("memory.oom_control") or "")
            return CgroupStats(
                nr_throttled=cpu_stat.get("nr_throttled", 0),
                throttled_s=cpu_stat.get("throttled_time", 0) / 1e9,
                mem_peak_bytes=_int_or_none(self.read("memory.max_usage_in_bytes")),
                oom_kills=oom.get("oom_kill"),
                mem_limit_hits=_int_or_none(self.read("memory.failcnt")) or 0,
            )
        events = _parse_keyed(self.read("memory.events") or "")
        return CgroupStats(
            nr_throttled=cpu_stat.get("nr_throttled", 0),
            throttled_s=cpu_stat.get("throttled_usec", 0) / 1e6,
            mem_peak_bytes=_int_or_none(self.read("memory.peak")),
            oom_kills=events.get("oom_kill"),
            mem_limit_hits=events.get("max", 0),
        )

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill what is left inside, remove the job's directories, then their parents if empty."""
        deadline = time.monotonic() + timeout_s
        for directory in reversed(self.plan.job_dirs):
            while directory.is_dir():
                for pid in self.pids():
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            with contextlib.suppress(OSError):  # busy: another job still uses it
                directory.parent.rmdir()


def _make_dir(directory: Path, attempts: int = 3) -> None:
    """Make a job directory and its parent; retry if another job removed the parent meanwhile."""
    for attempt in range(attempts):
        try:
            directory.mkdir(parents=True, exist_ok=False)
            return
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise


def _writable(directory: Path) -> Path:
    if not os.access(directory, os.W_OK):
        raise CgroupUnavailableError(f"cgroup directory {directory} is not writable")
    return directory


def _v1_base(mount: CgroupMount) -> Path:
    own = mount.own_dir()
    if own.is_dir() and os.access(own, os.W_OK):
        return own
    return _writable(mount.mount)


def _apply_write(write: CgroupWrite) -> None:
    try:
        current = read_value(write.path)
        if write.path.name == "cgroup.subtree_control" and current is not None:
            wanted = {c.lstrip("+") for c in write.value.split()}
            if wanted <= set(current.split()):
                return
        write.path.write_text(write.value)
    except OSError:
        if not write.optional:
            raise


def _parse_keyed(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value.strip())
    return values


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def systemd_scope_result(unit: str) -> str | None:
    """Return the ``Result`` of a finished scope (``"oom-kill"``, ``"success"``...) and forget it.

    Returns None where ``systemctl`` cannot say.
    """
    try:
        shown = subprocess.run(
            ["systemctl", "show", "--property=Result", "--value", unit],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        subprocess.run(["systemctl", "reset-failed", unit], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return shown.stdout.strip() or None
