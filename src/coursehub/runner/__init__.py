"""Run a script in a fresh interpreter with explicit resources (threads, memory, GPUs, time).

Python API::

    from coursehub.runner import run, submit
    result = run("train.py", ["model.pt", "100"], n_threads=2, mem_limit="4G", timeout_s="30m")
    job = submit("coursehub.pendulum.train", ["lstm", "5", "2"], module=True, n_threads=2)
    print(job.state, job.wait().elapsed_s)

Command line: ``coursehub run --threads 2 --mem 4G -- train.py model.pt 100``.
IPython: ``%load_ext coursehub.runner`` then ``%coursehub_run --threads 2 train.py ...``.

Names are imported on first use so that the job's bootstrap, which lives in
this package, starts without loading the rest of it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "run": "coursehub.runner.api",
    "submit": "coursehub.runner.api",
    "make_spec": "coursehub.runner.api",
    "Backend": "coursehub.runner.core",
    "Job": "coursehub.runner.core",
    "JobSpec": "coursehub.runner.core",
    "RunResult": "coursehub.runner.core",
    "render_summary": "coursehub.runner.core",
    "LocalBackend": "coursehub.runner.local",
    "SlotPool": "coursehub.runner.slots",
}

__all__ = [*_EXPORTS, "load_ipython_extension"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'coursehub.runner' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%coursehub_run`` (``%load_ext coursehub.runner``)."""
    from coursehub.runner.magic import register_magic

    register_magic(ipython)
