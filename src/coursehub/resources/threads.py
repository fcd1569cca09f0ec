"""Thread-count environment for numerical libraries.

A CFS CPU quota is invisible to the CPU counts that OpenMP, OpenBLAS, MKL and
PyTorch read, so each library starts one thread per host core and, inside a
small quota, the threads throttle each other (the quota: Linux
Documentation/scheduler/sched-bwc.rst; thread counts: OpenMP API
specification, ``OMP_NUM_THREADS``, and PyTorch docs "CPU threading and
TorchScript inference", ``torch.set_num_threads``); measured in a course:
291 s -> 46,129 s (M. Buffat, "JupyterHub pour l'enseignement de l'IA",
JCAD 2024). The fix is to tell every library the thread count explicitly,
in the environment, before the library loads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from coursehub.errors import UsageError

#: Variables set to the thread count ``n``. Sources: the OpenMP spec
#: (OMP_NUM_THREADS), MKL, OpenBLAS, BLIS, Apple Accelerate (VECLIB), numexpr,
#: numba, TensorFlow, loky/joblib, and CPython 3.13 (PYTHON_CPU_COUNT).
N_THREAD_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS",
    "NUMBA_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "LOKY_MAX_CPU_COUNT",
    "PYTHON_CPU_COUNT",
)


def thread_env(n_threads: int, keep: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment variables that cap every common thread pool at ``n_threads``.

    Parameters
    ----------
    n_threads
        Threads per process, >= 1 (typically ``floor(cpu_limit)``).
    keep
        An environment whose explicit settings win (an admin's choice is kept):
        any variable of the result already present in ``keep`` is left out.

    Returns
    -------
    dict
        ``OMP_NUM_THREADS`` and its siblings set to ``n_threads``,
        ``TF_NUM_INTEROP_THREADS`` = min(2, n), ``OMP_WAIT_POLICY=PASSIVE``
        (no spin-waiting at OpenMP barriers; libgomp spins ~300,000 times by
        default) and ``KMP_BLOCKTIME=0`` (the same for Intel's runtime).

    Raises
    ------
    UsageError
        If ``n_threads`` is not a positive integer.
    """
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise UsageError(f"thread count must be a positive integer, got {n_threads!r}")
    env = {name: str(n_threads) for name in N_THREAD_VARS}
    env["TF_NUM_INTEROP_THREADS"] = str(min(2, n_threads))
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["KMP_BLOCKTIME"] = "0"
    if keep:
        env = {k: v for k, v in env.items() if k not in keep}
    return env


def threads_for_cpu_limit(cpu_limit: float) -> int:
    """Return the thread count for a CPU quota: ``max(1, floor(cpu_limit))``.

    Raises
    ------
    UsageError
        If ``cpu_limit`` is not a positive finite number.
    """
    if not math.isfinite(cpu_limit) or cpu_limit <= 0:
        raise UsageError(f"cpu_limit must be a positive number of CPUs, got {cpu_limit!r}")
    return max(1, math.floor(cpu_limit))
