"""A runner job's GPU memory: its budget, what the frameworks are told, when it is over (pure).

A job's budget (``gpu_mem_limit``, bytes) is the GPU memory its processes
may hold together on its GPU, CUDA context included: the figure NVML gives
per process (``nvmlDeviceGetComputeRunningProcesses``, ``usedGpuMemory``,
NVML API Reference), summed over the job's process tree by
:class:`coursehub.runner.monitor.TreeMonitor`. A job that declares none
(``coursehub run --gpu-mem``, or its course profile's ``gpu_mem_limit``
through ``COURSEHUB_GPU_MEM_LIMIT``) gets an equal share of its GPU:
(total - reserve) / jobs per GPU (:func:`plan_gpu_budget`).

The frameworks are told their part of it before they start
(:func:`plan_framework_env`):

* PyTorch: the bootstrap calls ``torch.cuda.set_per_process_memory_fraction``
  with ``COURSEHUB_GPU_MEM_FRACTION`` (PyTorch docs, "CUDA semantics",
  memory management: the fraction caps the caching allocator, not the CUDA
  context, and an allocation over it raises an out-of-memory error);
* TensorFlow: ``TF_FORCE_GPU_ALLOW_GROWTH=true`` (TensorFlow guide, "Use a
  GPU", limiting GPU memory growth: without it TensorFlow maps nearly all of
  the GPU's memory at start);
* JAX: ``XLA_PYTHON_CLIENT_MEM_FRACTION`` (JAX docs, "GPU memory allocation":
  JAX preallocates that fraction of the GPU's total memory, 75 % by default).

These are advisory: the allocator cap leaves the context and other libraries
out, and TensorFlow grows without bound. The budget is kept by the runner's
monitor, which stops the job's process group once the sampled NVML figure
passes it (:func:`gpu_budget_reason`), at most one sampling period late.
"""

from __future__ import annotations

from collections.abc import Sequence

from coursehub.contract import GPU_MEM_LIMIT_VAR
from coursehub.errors import UsageError
from coursehub.resources.units import describe_mem

__all__ = ["GPU_MEM_FRACTION_VAR", "GPU_MEM_LIMIT_VAR"]

#: The bootstrap's variable: the PyTorch allocator's fraction of the GPU.
GPU_MEM_FRACTION_VAR = "COURSEHUB_GPU_MEM_FRACTION"
#: GPU memory left out of every budget for the CUDA context of one process, bytes.
#: A context costs some hundreds of MiB (it depends on the GPU, the driver and
#: the libraries loaded); what the allocators are told is the budget minus this.
CONTEXT_ALLOWANCE_BYTES = 512 * 1024**2


def plan_gpu_budget(
    declared_bytes: int | None, usable_bytes: int | None, gpu_jobs: int
) -> int | None:
    """Return a job's GPU memory budget in bytes: the declared one, else an equal share.

    Parameters
    ----------
    declared_bytes
        The job's ``gpu_mem_limit`` (bytes), or None.
    usable_bytes
        The GPU's total memory minus the reserve (bytes), or None when NVML
        cannot say.
    gpu_jobs
        Jobs allowed at once on one GPU (>= 1).

    Returns
    -------
    int or None
        ``declared_bytes``; else ``usable_bytes // gpu_jobs``; None when
        neither is known (no budget: nothing enforced).
    """
    if declared_bytes is not None:
        return declared_bytes
    if usable_bytes is None or usable_bytes <= 0:
        return None
    return usable_bytes // max(1, gpu_jobs)


def check_gpu_budget(budget_bytes: int | None, usable_bytes: Sequence[int]) -> None:
    """Refuse a GPU budget larger than what any GPU can give (``usable_bytes``, one per GPU).

    Raises
    ------
    UsageError
        Naming the budget and the largest GPU memory available to jobs.
    """
    if budget_bytes and usable_bytes and budget_bytes > max(usable_bytes):
        raise UsageError(
            f"gpu_mem_limit {describe_mem(budget_bytes)} is more than any GPU here can give "
            f"({describe_mem(max(usable_bytes))}: its memory less COURSEHUB_GPU_MEM_RESERVE)"
        )


def plan_allocator_bytes(budget_bytes: int) -> int:
    """Return what the allocators may take of ``budget_bytes``: the budget minus a context.

    :data:`CONTEXT_ALLOWANCE_BYTES` is kept for the CUDA context, which the
    allocator caps do not count; at least half the budget is given.
    """
    return max(budget_bytes - CONTEXT_ALLOWANCE_BYTES, budget_bytes // 2)


def plan_framework_env(budget_bytes: int | None, total_bytes: int | None) -> dict[str, str]:
    """Return the variables that tell PyTorch, TensorFlow and JAX the job's GPU budget.

    Parameters
    ----------
    budget_bytes
        The job's budget (:func:`plan_gpu_budget`), or None.
    total_bytes
        The GPU's total memory in bytes (NVML ``nvmlDeviceGetMemoryInfo``), or None.

    Returns
    -------
    dict
        ``TF_FORCE_GPU_ALLOW_GROWTH=true`` always; with both figures,
        ``COURSEHUB_GPU_MEM_FRACTION`` (the bootstrap's) and
        ``XLA_PYTHON_CLIENT_MEM_FRACTION`` (the allocators' part,
        :func:`plan_allocator_bytes`, over the total, 4 decimals, at most 1).
    """
    env = {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    if budget_bytes is None or not total_bytes:
        return env
    fraction = min(1.0, plan_allocator_bytes(budget_bytes) / total_bytes)
    env[GPU_MEM_FRACTION_VAR] = f"{fraction:.4f}"
    env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{fraction:.4f}"
    return env


def gpu_budget_reason(used_bytes: int, peak_bytes: int, budget_bytes: int | None) -> str | None:
    """Return the line that says a job passed its GPU budget, or None while it is within it.

    ``used_bytes``: the job's GPU memory now; ``peak_bytes``: its highest
    sample so far (both bytes, NVML's figures summed over the job's tree).
    """
    if budget_bytes is None or used_bytes <= budget_bytes:
        return None
    return (
        f"exceeded its GPU memory budget of {describe_mem(budget_bytes)} "
        f"(peak {describe_mem(max(peak_bytes, used_bytes))})"
    )


def ordinal(n: int) -> str:
    """Return ``1st``, ``2nd``, ``3rd``, ``4th``, ... ``11th``, ``21st``."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{({1: 'st', 2: 'nd', 3: 'rd'}).get(n % 10, 'th')}"


def describe_gpu_queue(ahead: int, need_bytes: int | None) -> str:
    """Return the line shown to a job waiting for a GPU.

    ``"waiting for a GPU: 2nd in line, needs 1.3 GiB"`` (``ahead`` jobs before
    it in the queue; ``need_bytes`` its budget, None: not known).
    """
    need = f", needs {describe_mem(need_bytes)}" if need_bytes else ""
    return f"waiting for a GPU: {ordinal(ahead + 1)} in line{need}"
