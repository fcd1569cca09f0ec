"""GPU inventory through NVML (``nvidia-ml-py``, module ``pynvml``).

NVML numbers devices in PCI bus order, the order CUDA uses when
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA C Programming Guide, "CUDA
Environment Variables"; NVML API Reference, ``nvmlDeviceGetHandleByIndex``
and ``nvmlDeviceGetPciInfo``), so an index here is
a valid ``CUDA_VISIBLE_DEVICES`` entry for a child started that way.
Process ids are those of the PID namespace the driver sees (the host's):
inside a container they may not match ``os.getpid()``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuProcess:
    """A process holding GPU memory: ``pid`` and ``used_mem_bytes`` (0 when NVML cannot say)."""

    pid: int
    used_mem_bytes: int


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: NVML index, name, UUID, memory in bytes, compute processes."""

    index: int
    name: str
    uuid: str
    mem_total_bytes: int
    mem_used_bytes: int
    processes: tuple[GpuProcess, ...]


def load_nvml() -> Any | None:
    """Import ``pynvml`` and initialise NVML; return the module, or None without GPU or driver."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    return nvml


def gpu_inventory(nvml: Any | None = None) -> list[GpuInfo]:
    """Return every GPU NVML sees, or [] where there is no GPU, driver or ``pynvml``.

    Parameters
    ----------
    nvml
        The ``pynvml`` module (or an object with the same functions). By
        default it is imported and initialised here, and shut down after.

    Returns
    -------
    list of GpuInfo
        In NVML (PCI bus) order. A device NVML fails to describe is left out.
    """
    owned = nvml is None
    nvml = load_nvml() if owned else nvml
    if nvml is None:
        return []
    try:
        return [
            info for index in range(nvml.nvmlDeviceGetCount()) if (info := _describe(nvml, index))
        ]
    except nvml.NVMLError:
        return []
    finally:
        if owned:
            nvml.nvmlShutdown()


def gpu_memory_of(pids: Iterable[int], inventory: list[GpuInfo]) -> int:
    """Return the GPU memory in bytes held by ``pids`` over all GPUs of ``inventory``."""
    wanted = set(pids)
    return sum(
        proc.used_mem_bytes for gpu in inventory for proc in gpu.processes if proc.pid in wanted
    )


def _describe(nvml: Any, index: int) -> GpuInfo | None:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return GpuInfo(
            index=index,
            name=_text(nvml.nvmlDeviceGetName(handle)),
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            mem_total_bytes=int(memory.total),
            mem_used_bytes=int(memory.used),
            processes=tuple(GpuProcess(int(p.pid), int(p.usedGpuMemory or 0)) for p in processes),
        )
    except nvml.NVMLError:
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
