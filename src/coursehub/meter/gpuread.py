"""GPU memory held by the processes of a cgroup, through NVML (``nvidia-ml-py``).

The hub's sampler asks NVML once per pass for every GPU's compute processes
(``nvmlDeviceGetComputeRunningProcesses``: pid and ``usedGpuMemory``, NVML
API Reference) through :func:`coursehub.resources.gpus.gpu_inventory`, and
charges each server the memory of the pids in its cgroup
(:func:`coursehub.resources.gpus.gpu_memory_of`). The pids are read from the
``cgroup.procs`` files of the cgroup and of the groups below it (Linux
``Documentation/admin-guide/cgroup-v1/cgroups.rst`` and ``cgroup-v2.rst``):
the hub runs in the host's PID namespace, the one NVML reports pids in.

A runner job's GPU memory is sampled by its runner
(:class:`coursehub.runner.monitor.TreeMonitor`) and handed to
:class:`coursehub.meter.sampler.JobMeter`; a job has its own cgroup, so it is
never charged to the server it was started from.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from coursehub.meter.cgroupread import parse_int
from coursehub.resources.gpus import GpuInfo, gpu_inventory, gpu_memory_of, load_nvml


def parse_procs(text: str) -> set[int]:
    """Return the pids of a ``cgroup.procs`` text (one a line; anything else is skipped)."""
    return {pid for line in text.splitlines() if (pid := parse_int(line.strip())) is not None}


def cgroup_pids(dirs: Iterable[Path]) -> set[int]:
    """Return the pids in the cgroup directories ``dirs`` and the groups below them.

    A directory that is gone (the server stopped) or unreadable adds nothing.
    """
    pids: set[int] = set()
    for directory in dirs:
        for root, _subdirs, files in os.walk(directory):
            if "cgroup.procs" in files:
                try:
                    pids |= parse_procs(Path(root, "cgroup.procs").read_text())
                except OSError:
                    continue
    return pids


class GpuReader:
    """NVML, initialised on first use, for the GPU memory of cgroups.

    Parameters
    ----------
    nvml
        The ``pynvml`` module or an object with its functions (tests); None:
        ``pynvml`` is imported and NVML initialised on the first
        :meth:`inventory`. Where there is no driver or ``pynvml``, every
        reading is 0 and NVML is not tried again.
    """

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml = nvml
        self._tried = nvml is not None

    def inventory(self) -> list[GpuInfo]:
        """Return the GPUs and their compute processes now ([] without NVML)."""
        if not self._tried:
            self._tried = True
            self._nvml = load_nvml()
        return gpu_inventory(self._nvml) if self._nvml is not None else []

    @staticmethod
    def memory_of(dirs: Iterable[Path], inventory: list[GpuInfo]) -> int:
        """Return the GPU memory in bytes held by the processes of the cgroup ``dirs``."""
        return gpu_memory_of(cgroup_pids(dirs), inventory) if inventory else 0
