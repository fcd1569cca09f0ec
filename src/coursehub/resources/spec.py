"""``ResourceSpec``: the resources of one job or one user server, shared by every part."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from coursehub.errors import UsageError
from coursehub.resources.threads import threads_for_cpu_limit


def check_count(field_name: str, value: object, minimum: int) -> int:
    """Return ``value`` if it is an integer >= ``minimum`` (not a bool).

    Raises
    ------
    UsageError
        Naming ``field_name`` and the value at fault.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{field_name} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class ResourceSpec:
    """CPU quota, memory limit, thread count and GPUs of a job or a server.

    Parameters
    ----------
    cpu_limit
        CPUs the job may use (a CFS quota; fractional allowed). Defaults to
        ``n_threads``, or 1 when neither is given.
    mem_limit
        Memory limit in bytes (RAM + swap), or None for no limit. Build it
        from text with :func:`coursehub.resources.units.parse_mem` (``"4G"``).
    n_threads
        Threads per numerical library; defaults to ``floor(cpu_limit)``
        (at least 1): one thread per CPU of the quota (PyTorch docs, "CPU
        threading and TorchScript inference": more threads than cores
        oversubscribe).
    gpus
        Number of GPUs, >= 0.
    gpu_mem_limit
        GPU memory budget in bytes on each GPU of the job, CUDA context
        included (as NVML counts a process's memory), or None: no budget of
        its own (the runner gives an equal share of the GPU). Only with
        ``gpus`` >= 1.

    Raises
    ------
    UsageError
        If a value is out of range (non-positive CPUs, threads or memory,
        negative GPUs, a GPU memory budget without a GPU).
    """

    cpu_limit: float | None = None
    mem_limit: int | None = None
    n_threads: int | None = field(default=None)
    gpus: int = 0
    gpu_mem_limit: int | None = None

    def __post_init__(self) -> None:
        n_threads = self.n_threads
        if n_threads is not None:
            check_count("n_threads", n_threads, 1)
        if self.cpu_limit is not None:
            cpu_limit = float(self.cpu_limit)
            if not math.isfinite(cpu_limit) or cpu_limit <= 0:
                raise UsageError(f"cpu_limit must be a positive number of CPUs, got {cpu_limit!r}")
            n_threads = n_threads or threads_for_cpu_limit(cpu_limit)
        else:
            n_threads = n_threads or 1
            cpu_limit = float(n_threads)
        if self.mem_limit is not None and (
            isinstance(self.mem_limit, bool)
            or not isinstance(self.mem_limit, int)
            or self.mem_limit < 1
        ):
            raise UsageError(
                f"mem_limit must be a positive number of bytes, got {self.mem_limit!r}"
            )
        check_count("gpus", self.gpus, 0)
        if self.gpu_mem_limit is not None:
            check_count("gpu_mem_limit", self.gpu_mem_limit, 1)
            if not self.gpus:
                raise UsageError(
                    f"gpu_mem_limit {self.gpu_mem_limit} bytes is set but gpus is 0: "
                    "a GPU memory budget needs a GPU"
                )
        object.__setattr__(self, "cpu_limit", cpu_limit)
        object.__setattr__(self, "n_threads", n_threads)

    @property
    def threads(self) -> int:
        """``n_threads`` as a plain int (always set after construction)."""
        assert self.n_threads is not None
        return self.n_threads

    @property
    def cpus(self) -> float:
        """``cpu_limit`` as a plain float (always set after construction)."""
        assert self.cpu_limit is not None
        return self.cpu_limit
