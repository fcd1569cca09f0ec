"""NVIDIA MPS for a class's runner jobs on one GPU: the environment of each client (pure).

With ``COURSEHUB_GPU_MPS=1`` (off by default) and ``nvidia-cuda-mps-control``
on the ``PATH``, a runner job on a GPU is started as an MPS client of the
control daemon whose pipe directory is ``$COURSEHUB_GPU_MPS_DIR/pipe``
(default ``/tmp/coursehub-mps``), with ``CUDA_MPS_PIPE_DIRECTORY``,
``CUDA_MPS_LOG_DIRECTORY`` and ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (the
client's share of the GPU's SMs: 100 / jobs per GPU, at least 1). The
runner does not start the daemon: the host's administrator does
(``nvidia-cuda-mps-control -d`` with the same two directories), as the
owner of the GPU's jobs.

What MPS gives and does not (NVIDIA Multi-Process Service documentation,
"Introduction", "Memory protection and error containment", and the
``nvidia-cuda-mps-control`` man page):

* kernels of different clients run at once on the GPU instead of being
  time-sliced, so small jobs (a pendulum LSTM uses a tenth of a GPU) no
  longer wait for each other's slices;
* on Volta and later GPUs, each client has its own GPU address space
  (memory protection) and the active-thread percentage bounds its SMs;
  before Volta, clients share one address space and one client's
  out-of-range write can corrupt another's memory;
* a fatal GPU fault in one client (an illegal address, an assertion in a
  kernel) may end every client of the same daemon, on Volta and later too:
  error containment is limited. MPS gives no memory quota: the budgets of
  :mod:`coursehub.runner.gpumem` still hold, enforced through NVML;
* one MPS server serves one Unix user at a time: clients of other users
  wait until it has no client left. Where each student's jobs run under the
  student's own account, MPS serialises the class instead of sharing the GPU.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

#: The setting that turns MPS on for runner jobs ("1"), and the daemon's folder.
MPS_VAR = "COURSEHUB_GPU_MPS"
MPS_DIR_VAR = "COURSEHUB_GPU_MPS_DIR"
DEFAULT_MPS_DIR = Path("/tmp/coursehub-mps")
#: The MPS control program; its presence says the driver offers MPS.
MPS_CONTROL = "nvidia-cuda-mps-control"


def mps_enabled(environ: Mapping[str, str]) -> bool:
    """Return True if ``COURSEHUB_GPU_MPS`` asks for MPS (``1``, ``true``, ``yes``, ``on``)."""
    return environ.get(MPS_VAR, "").strip().lower() in ("1", "true", "yes", "on")


def plan_mps_env(
    environ: Mapping[str, str],
    gpu_jobs: int,
    which: Callable[[str], str | None] = shutil.which,
) -> dict[str, str]:
    """Return the MPS client variables of a job on a GPU, or {} where MPS is off or absent.

    Parameters
    ----------
    environ
        The runner's settings (``COURSEHUB_GPU_MPS``, ``COURSEHUB_GPU_MPS_DIR``).
    gpu_jobs
        Jobs allowed at once on one GPU (>= 1): each client's active-thread
        percentage is ``100 // gpu_jobs`` (at least 1).
    which
        Finds a program on the ``PATH`` (:func:`shutil.which`).

    Returns
    -------
    dict
        ``CUDA_MPS_PIPE_DIRECTORY`` (``<dir>/pipe``), ``CUDA_MPS_LOG_DIRECTORY``
        (``<dir>/log``) and ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``.
    """
    if not mps_enabled(environ) or which(MPS_CONTROL) is None:
        return {}
    folder = Path(environ.get(MPS_DIR_VAR) or DEFAULT_MPS_DIR)
    return {
        "CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(folder / "log"),
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(1, 100 // max(1, gpu_jobs))),
    }
