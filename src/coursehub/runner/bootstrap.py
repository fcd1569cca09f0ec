"""The first code of every job: ``python -m coursehub.runner.bootstrap [-m] TARGET ARGS...``.

Before the user's code runs it

1. joins the job's cgroup when ``COURSEHUB_CGROUP_PROCS`` names its
   ``cgroup.procs`` files (``os.pathsep``-separated), so that nothing the
   script does runs outside its limits;
2. arranges for PyTorch, if and when the script imports it, to use exactly
   ``COURSEHUB_N_THREADS`` threads (``torch.set_num_threads`` and
   ``set_num_interop_threads``, right after ``import torch`` and before any
   torch work) and, when ``COURSEHUB_GPU_MEM_FRACTION`` is set (a GPU shared
   by several jobs), to cap its allocator with
   ``torch.cuda.set_per_process_memory_fraction`` on every visible GPU. A
   one-shot import hook does this, so a job that never imports torch does not
   pay for loading it;
3. starts the job's watchdog (:mod:`coursehub.runner.watchdog`) when the
   runner passed its lifeline (``COURSEHUB_PARENT_FD``): the job is stopped
   if the runner dies, keeps its time limit whether the runner lives (stopped
   or frozen runners included) or is gone (a detached job), and leaves
   nothing behind in its process group or cgroup when it ends; the watchdog
   holds the slot locks, the job's own copies are closed;
4. runs the script as ``__main__`` (``runpy.run_path``, ``sys.path[0]`` = the
   script's directory, as ``python script.py`` does) or the module
   (``runpy.run_module``, as ``python -m`` does) with ``sys.argv`` set.

The thread variables (OMP_NUM_THREADS, ...) are already in the environment,
set by the runner before the interpreter started: OpenMP reads
``OMP_NUM_THREADS`` once, when the runtime initialises (OpenMP API
specification, "Environment Variables"), and PyTorch sizes its intra-op pool
from it (PyTorch docs, "CPU threading and TorchScript inference").
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
from collections.abc import Sequence
from types import ModuleType


def join_cgroup(procs_files: str) -> None:
    """Write this process's pid to each ``cgroup.procs`` file of an ``os.pathsep`` list."""
    for path in filter(None, procs_files.split(os.pathsep)):
        with open(path, "w") as procs:
            procs.write(str(os.getpid()))


def configure_torch(torch: ModuleType, n_threads: int, gpu_mem_fraction: float | None) -> None:
    """Give ``torch`` exactly ``n_threads`` threads; cap GPU memory per process if asked."""
    torch.set_num_threads(n_threads)
    # Fails once inter-op work has started; the intra-op count above still holds.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(n_threads)
    if gpu_mem_fraction is not None and torch.cuda.is_available():
        for device in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(gpu_mem_fraction, device)


class TorchHook(importlib.abc.MetaPathFinder):
    """Import hook that calls :func:`configure_torch` once ``torch`` has loaded."""

    def __init__(self, n_threads: int, gpu_mem_fraction: float | None) -> None:
        self.n_threads = n_threads
        self.gpu_mem_fraction = gpu_mem_fraction

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_configure(module: ModuleType) -> None:
            exec_module(module)
            configure_torch(module, self.n_threads, self.gpu_mem_fraction)

        loader.exec_module = exec_then_configure  # type: ignore[method-assign]
        return spec


def install_torch_hook(n_threads: int, gpu_mem_fraction: float | None) -> None:
    """Configure torch now if it is already loaded, else when it is first imported."""
    if "torch" in sys.modules:
        configure_torch(sys.modules["torch"], n_threads, gpu_mem_fraction)
    else:
        sys.meta_path.insert(0, TorchHook(n_threads, gpu_mem_fraction))


def run_target(argv: Sequence[str]) -> None:
    """Run ``TARGET ARGS...`` or ``-m MODULE ARGS...`` as ``__main__``.

    The import path starts as ``python -m MODULE`` or ``python SCRIPT``
    would start it: the working directory or the script's folder first,
    unless ``PYTHONSAFEPATH``/``-P`` (``sys.flags.safe_path``, Python 3.11)
    says to put neither there (an autograde runs in a course directory the
    team may write to).
    """
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        raise SystemExit("usage: python -m coursehub.runner.bootstrap [-m] TARGET [ARGS...]")
    safe = bool(sys.flags.safe_path)
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        if not safe:
            sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = os.path.abspath(argv[0])
    sys.argv = [argv[0], *argv[1:]]
    if not safe:
        sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


def main(argv: Sequence[str] | None = None) -> None:
    """Prepare the interpreter from the environment the runner set, then run the target."""
    procs_files = os.environ.pop("COURSEHUB_CGROUP_PROCS", "")
    if procs_files:
        join_cgroup(procs_files)
    parent_fd = os.environ.pop("COURSEHUB_PARENT_FD", "")
    orphan = os.environ.pop("COURSEHUB_ORPHAN", "kill")
    timeout = os.environ.pop("COURSEHUB_TIMEOUT_S", "")
    grace = os.environ.pop("COURSEHUB_GRACE_S", "5")
    slot_fds = [int(fd) for fd in os.environ.pop("COURSEHUB_SLOT_FDS", "").split(",") if fd]
    if parent_fd:
        from coursehub.runner.watchdog import start_watchdog

        cgroup = [path for path in procs_files.split(os.pathsep) if path]
        start_watchdog(
            int(parent_fd),
            orphan,
            float(timeout) if timeout else None,
            float(grace),
            slot_fds,
            cgroup,
        )
    n_threads = int(os.environ.get("COURSEHUB_N_THREADS", "1"))
    fraction = os.environ.get("COURSEHUB_GPU_MEM_FRACTION")
    install_torch_hook(n_threads, float(fraction) if fraction else None)
    run_target(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
