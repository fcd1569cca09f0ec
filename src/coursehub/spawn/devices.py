"""Which GPU device nodes a local server may open: cgroup v1 ``devices`` rules (pure planning).

A server whose profile has no GPU must not open any ``/dev/nvidia*`` node; a
server given GPUs ``[1]`` opens ``/dev/nvidia1`` and the shared control nodes
(``nvidiactl``, ``nvidia-modeset``, ``nvidia-uvm``), never another GPU.
``CUDA_VISIBLE_DEVICES`` alone is a hint a student can change, so the local
spawner enforces this with the cgroup v1 devices controller
(``Documentation/admin-guide/cgroup-v1/devices.rst``). The server's devices
cgroup is switched to "deny all" (``a`` written to ``devices.deny``), then
allowed every character major of ``/proc/devices`` except NVIDIA's, plus,
for a GPU profile, its own ``/dev/nvidiaN`` and the shared NVIDIA nodes.
A whitelist is used because in "allow all" mode the kernel cannot narrow a
wildcard deny with a later allow, and ``devices.list`` then shows
``a *:* rwm`` whatever is denied; a whitelist is what ``devices.list``
prints, so it can be checked. Block devices are not allowed (a notebook
server opens none); devices whose driver loads after the server starts are
not allowed either.

Device numbers (``Documentation/admin-guide/devices.txt``): character major
195 is "Nvidia graphics devices": minor N is ``/dev/nvidiaN``, 255
``/dev/nvidiactl``; the driver uses 254 for ``/dev/nvidia-modeset``. The
majors of ``nvidia-uvm`` (and ``nvidia-uvm-tools``), ``nvidia-caps`` and
``nvidia-nvswitch`` are dynamic: read from ``/proc/devices``.

cgroup v2 has no devices files: access is decided by an eBPF program attached
to the cgroup (``BPF_PROG_TYPE_CGROUP_DEVICE``), which systemd builds for
``DevicePolicy=``; coursehub does not load BPF itself. There, use
SystemdSpawner (``coursehub hub config --spawner systemd``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Character major of /dev/nvidia* (Linux Documentation/admin-guide/devices.txt, "195 char").
NVIDIA_MAJOR = 195
#: Minor of /dev/nvidiactl (devices.txt: "255 = /dev/nvidiactl").
NVIDIACTL_MINOR = 255
#: Minor of /dev/nvidia-modeset (NVIDIA driver, nvidia-modeset).
NVIDIA_MODESET_MINOR = 254
#: Minors a GPU may have: /dev/nvidia0 ... /dev/nvidia253.
GPU_MINORS = range(0, NVIDIA_MODESET_MINOR)


@dataclass(frozen=True)
class DeviceRule:
    """One line for a v1 devices cgroup file (``file``: ``devices.deny`` or ``devices.allow``)."""

    file: str
    rule: str


def parse_proc_devices(text: str) -> dict[str, int]:
    """Return the character devices of ``/proc/devices``: name -> major.

    The file has a ``Character devices:`` section then a ``Block devices:``
    section, each of ``major name`` lines (``man 5 proc``); malformed lines
    are skipped.
    """
    found: dict[str, int] = {}
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":"):
            section = stripped
            continue
        fields = stripped.split(None, 1)
        if section == "Character devices:" and len(fields) == 2 and fields[0].isdigit():
            found.setdefault(fields[1], int(fields[0]))
    return found


def nvidia_majors(char_devices: Mapping[str, int]) -> dict[str, int]:
    """Return the NVIDIA character devices (name -> major), always with 195 as ``nvidia``.

    Every name starting with ``nvidia`` counts (``nvidia-frontend`` or
    ``nvidia`` for 195, ``nvidia-uvm``, ``nvidia-caps``, ``nvidia-nvswitch``...).
    """
    majors = {name: major for name, major in char_devices.items() if name.startswith("nvidia")}
    if NVIDIA_MAJOR not in majors.values():
        majors["nvidia"] = NVIDIA_MAJOR
    return majors


def plan_device_rules(
    gpu_minors: Sequence[int], char_devices: Mapping[str, int]
) -> list[DeviceRule]:
    """Return the v1 devices rules that let a server open only its own GPUs.

    Parameters
    ----------
    gpu_minors
        Minors of the server's GPUs (``/dev/nvidiaN`` is minor N); empty for
        a profile without GPU.
    char_devices
        This host's character devices, name -> major (:func:`parse_proc_devices`).

    Returns
    -------
    list of DeviceRule
        ``devices.deny a`` first, then one ``c MAJOR:* rwm`` allow per
        non-NVIDIA major. With GPUs, also ``c 195:N rwm`` per own GPU,
        ``nvidiactl`` (195:255), ``nvidia-modeset`` (195:254) and every
        other NVIDIA major (``nvidia-uvm``, ``nvidia-caps``...).

    Raises
    ------
    ValueError
        If a minor is not a GPU minor (0-253).
    """
    own = sorted(set(gpu_minors))
    bad = [m for m in own if m not in GPU_MINORS]
    if bad:
        raise ValueError(f"GPU minors must be 0-253, got {bad}")
    nvidia = set(nvidia_majors(char_devices).values())
    others = sorted(set(char_devices.values()) - nvidia)
    rules = [DeviceRule("devices.deny", "a")]
    rules += [DeviceRule("devices.allow", f"c {major}:* rwm") for major in others]
    if own:
        minors = [*own, NVIDIA_MODESET_MINOR, NVIDIACTL_MINOR]
        rules += [DeviceRule("devices.allow", f"c {NVIDIA_MAJOR}:{m} rwm") for m in minors]
        rules += [
            DeviceRule("devices.allow", f"c {major}:* rwm")
            for major in sorted(nvidia - {NVIDIA_MAJOR})
        ]
    return rules


def nvidia_access(devices_list: str, minor: int) -> bool:
    """Return True if a v1 ``devices.list`` text lets a process open ``c 195:minor``.

    Reads the list the kernel prints (``a *:* rwm`` when everything is
    allowed, else the allowed entries); used to check what a cgroup allows.
    """
    for line in devices_list.splitlines():
        fields = line.split()
        if len(fields) != 3:
            continue
        kind, number, access = fields
        if kind not in ("a", "c") or "r" not in access:
            continue
        major, _, minor_text = number.partition(":")
        if major in ("*", str(NVIDIA_MAJOR)) and minor_text in ("*", str(minor)):
            return True
    return False
