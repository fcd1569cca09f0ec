"""Sampling a running job: resident memory of its process tree and GPU memory.

GPU memory is NVML's per-process figure (``nvmlDeviceGetComputeRunningProcesses``,
``usedGpuMemory``: NVML API Reference), summed over the pids of the job's
tree on every GPU; the runner compares it with the job's GPU budget
(:func:`coursehub.runner.gpumem.gpu_budget_reason`).

Used for the peak figures of every run and, where no cgroup can be made, as
the memory watchdog: the job's process group is killed once the sampled
resident memory of its tree passes the limit. Sampling every ``interval``
seconds can miss a short spike; a cgroup cannot (the kernel charges every
page as it is allocated: Linux Documentation/admin-guide/cgroup-v1/memory.rst,
cgroup-v2.rst "memory.max").
RLIMIT_AS is not used: it limits virtual memory, which CUDA and PyTorch
reserve far beyond what they use.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psutil

from coursehub.resources.gpus import gpu_inventory, gpu_memory_of, load_nvml


class TreeMonitor:
    """Peak memory of a process and its descendants, sampled on demand.

    Parameters
    ----------
    pid
        The job's main process.
    watch_gpus
        Also sample the GPU memory of the tree through NVML.
    nvml
        The ``pynvml`` module or an object with its functions, already
        initialised (tests give a fake); None: imported and initialised here,
        and shut down by :meth:`close`.

    Attributes
    ----------
    gpu_bytes, gpu_peak_bytes
        GPU memory of the tree at the last sample and at its highest, bytes
        (``gpu_peak_bytes`` None without NVML).
    """

    def __init__(self, pid: int, watch_gpus: bool = False, nvml: Any | None = None) -> None:
        self.pid = pid
        self.rss_bytes = 0
        self.peak_rss_bytes = 0
        self._owned = nvml is None
        self._nvml: Any | None = None
        if watch_gpus:
            self._nvml = load_nvml() if nvml is None else nvml
        self.gpu_bytes = 0
        self.gpu_peak_bytes: int | None = 0 if self._nvml is not None else None
        try:
            self._root: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:
            self._root = None

    def pids(self) -> set[int]:
        """Return the pids of the job's main process and its live descendants."""
        if self._root is None:
            return set()
        try:
            return {self.pid, *(p.pid for p in self._root.children(recursive=True))}
        except psutil.Error:
            return set()

    def sample(self) -> int:
        """Measure the tree's resident memory now; update the peaks; return bytes."""
        pids = self.pids()
        total = 0
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                total += psutil.Process(pid).memory_info().rss
        self.rss_bytes = total
        self.peak_rss_bytes = max(self.peak_rss_bytes, total)
        if self._nvml is not None and self.gpu_peak_bytes is not None:
            self.gpu_bytes = gpu_memory_of(pids, gpu_inventory(self._nvml))
            self.gpu_peak_bytes = max(self.gpu_peak_bytes, self.gpu_bytes)
        return total

    def cpu_s(self) -> float:
        """Return the CPU-seconds of the tree so far: the main process, its reaped children
        and its live descendants (a descendant reaped by another is counted no more)."""
        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system
                if pid == self.pid:
                    total += times.children_user + times.children_system
        return total

    def close(self) -> None:
        """Shut NVML down if it was started here."""
        if self._nvml is not None and self._owned:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None
