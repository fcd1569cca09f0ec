"""Where this process's cgroups are: ``/proc/self/cgroup`` resolved against the cgroup mount.

Both roots are parameters so that tests can stand a temporary directory in
for ``/sys/fs/cgroup`` and a text file in for ``/proc/self/cgroup``.

Layouts understood (``man 7 cgroups``):

* cgroup v1: one mount per controller under the root, named after its
  controllers (``cpu``, ``memory``, ``cpu,cpuacct``); lines
  ``ID:cpu,cpuacct:/path`` in ``/proc/self/cgroup``.
* cgroup v2: one unified mount, the root itself or ``ROOT/unified`` on hybrid
  hosts; the line ``0::/path``; available controllers in ``cgroup.controllers``.

A v1 controller wins over v2 on hybrid hosts, as the kernel only lets a
controller be bound to one hierarchy. When the process's own path is not
visible under the mount (a container without a cgroup namespace that
bind-mounts only its own group), missing levels are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Default mount of the cgroup filesystems.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Default list of this process's cgroups.
PROC_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class CgroupEntry:
    """One line of ``/proc/PID/cgroup``: ``hierarchy_id:controllers:path``."""

    hierarchy_id: int
    controllers: tuple[str, ...]
    path: str


@dataclass(frozen=True)
class CgroupMount:
    """A controller's hierarchy and this process's place in it.

    Attributes
    ----------
    version
        1 or 2.
    mount
        Directory where the hierarchy is mounted.
    path
        The process's cgroup, relative to the hierarchy root (``/a/b``).
    """

    version: int
    mount: Path
    path: str

    def own_dir(self) -> Path:
        """Return the directory of the process's own cgroup (it may not exist)."""
        return self.mount / self.path.strip("/")

    def ancestor_dirs(self) -> list[Path]:
        """Return the existing directories from the own cgroup up to the mount, own first."""
        parts = [p for p in self.path.strip("/").split("/") if p]
        dirs = [self.mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
        return [d for d in dirs if d.is_dir()]


def parse_proc_cgroup(text: str) -> list[CgroupEntry]:
    """Parse the text of ``/proc/PID/cgroup`` into entries; malformed lines are skipped."""
    entries = []
    for line in text.splitlines():
        fields = line.strip().split(":", 2)
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        controllers = tuple(c for c in fields[1].split(",") if c)
        entries.append(CgroupEntry(int(fields[0]), controllers, fields[2] or "/"))
    return entries


def read_proc_cgroup(proc_cgroup: Path = PROC_CGROUP) -> list[CgroupEntry]:
    """Return the entries of ``proc_cgroup``, or [] where it cannot be read (not Linux)."""
    try:
        return parse_proc_cgroup(Path(proc_cgroup).read_text())
    except OSError:
        return []


def locate_controller(
    controller: str,
    cgroup_root: Path = CGROUP_ROOT,
    proc_cgroup: Path = PROC_CGROUP,
) -> CgroupMount | None:
    """Return the hierarchy holding ``controller`` (``cpu``, ``memory``, ``cpuset``) or None.

    Parameters
    ----------
    controller
        Controller name as the kernel spells it.
    cgroup_root
        Where the cgroup filesystems are mounted.
    proc_cgroup
        The process's ``/proc/PID/cgroup`` file.
    """
    root = Path(cgroup_root)
    entries = read_proc_cgroup(proc_cgroup)
    for entry in entries:
        if controller in entry.controllers:
            mount = _v1_mount(root, entry.controllers, controller)
            if mount is not None:
                return CgroupMount(1, mount, entry.path)
    for entry in entries:
        if entry.hierarchy_id == 0 and not entry.controllers:
            mount = _v2_mount(root)
            if mount is not None and controller in read_controllers(mount):
                return CgroupMount(2, mount, entry.path)
    return None


def read_controllers(directory: Path) -> set[str]:
    """Return the controllers listed in ``directory/cgroup.controllers`` (v2)."""
    try:
        return set((directory / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def read_value(path: Path) -> str | None:
    """Return the stripped text of a cgroup file, or None if it cannot be read."""
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _v1_mount(root: Path, controllers: tuple[str, ...], controller: str) -> Path | None:
    names = [",".join(controllers), controller, ",".join(sorted(controllers))]
    for name in names:
        if (root / name).is_dir():
            return root / name
    return None


def _v2_mount(root: Path) -> Path | None:
    for mount in (root, root / "unified"):
        if (mount / "cgroup.controllers").is_file():
            return mount
    return None


#: Above this a v1 ``memory.limit_in_bytes`` means "no limit" (the kernel writes
#: ``PAGE_COUNTER_MAX`` pages, 9223372036854771712 on 64-bit hosts).
V1_NO_LIMIT = 2**62


@dataclass(frozen=True)
class MemoryState:
    """A memory cgroup's limit, peak and out-of-memory counters (None: not readable).

    Attributes
    ----------
    limit_bytes
        ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1); None without a limit.
    peak_bytes
        ``memory.peak`` (v2, Linux 5.19+) or ``memory.max_usage_in_bytes`` (v1).
    oom_kills
        Processes the OOM killer stopped in the cgroup: ``oom_kill`` of
        ``memory.events`` (v2) or of ``memory.oom_control`` (v1, Linux 4.13+).
    limit_hits
        Times usage reached the limit: ``max`` of ``memory.events`` (v2) or
        ``memory.failcnt`` (v1), the witness on kernels without ``oom_kill``.

    See https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-interface-files
    and https://docs.kernel.org/admin-guide/cgroup-v1/memory.html.
    """

    limit_bytes: int | None
    peak_bytes: int | None
    oom_kills: int | None
    limit_hits: int | None


def parse_keyed(text: str) -> dict[str, int]:
    """Parse ``key value`` lines (``memory.events``, ``memory.oom_control``); others skipped."""
    values = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].lstrip("-").isdigit():
            values[fields[0]] = int(fields[1])
    return values


def read_memory_state(mount: CgroupMount) -> MemoryState:
    """Return the :class:`MemoryState` of the process's own memory cgroup in ``mount``."""
    directory = mount.own_dir()

    def number(name: str) -> int | None:
        text = read_value(directory / name)
        return int(text) if text is not None and text.isdigit() else None

    if mount.version == 1:
        limit = number("memory.limit_in_bytes")
        oom = parse_keyed(read_value(directory / "memory.oom_control") or "")
        return MemoryState(
            limit_bytes=limit if limit is not None and limit < V1_NO_LIMIT else None,
            peak_bytes=number("memory.max_usage_in_bytes"),
            oom_kills=oom.get("oom_kill"),
            limit_hits=number("memory.failcnt"),
        )
    events = parse_keyed(read_value(directory / "memory.events") or "")
    return MemoryState(
        limit_bytes=number("memory.max"),
        peak_bytes=number("memory.peak"),
        oom_kills=events.get("oom_kill"),
        limit_hits=events.get("max"),
    )
