"""Checks on a job's target made before anything starts (the CLI's exit status 2)."""

from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

from coursehub.errors import UsageError
from coursehub.runner.job import JobSpec


def check_target(spec: JobSpec) -> None:
    """Check that the script file, or the module's top-level package, and the cwd exist.

    A module is looked up without importing anything: its top-level package
    on ``[cwd, *sys.path]`` (the child's path, as ``python -m`` builds it).

    Raises
    ------
    UsageError
        Naming the missing script, module or directory.
    """
    cwd = Path(spec.cwd) if spec.cwd else Path.cwd()
    if not cwd.is_dir():
        raise UsageError(f"working directory not found: {cwd}")
    if spec.module:
        top = spec.target.split(".")[0]
        if not top.isidentifier():
            raise UsageError(f"not a module name: {spec.target!r}")
        search = [str(cwd), *(p for p in sys.path if p)]
        if importlib.machinery.PathFinder.find_spec(top, search) is None:
            raise UsageError(
                f"module not found: {spec.target} (looked for {top!r} in {cwd} and sys.path)"
            )
        return
    script = cwd / spec.target
    if not script.is_file():
        raise UsageError(f"script not found: {script}")
    if not os.access(script, os.R_OK):
        raise UsageError(f"script not readable: {script}")
