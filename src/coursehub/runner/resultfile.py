"""Where a run's files go, and the result file format (``<job id>.json``).

Every job leaves, in the runs directory (:func:`coursehub.settings.runs_dir`), its
output ``<job id>.log`` and, once it has ended, its result
``<job id>.json``: the fields of :class:`coursehub.runner.result.RunResult`
as one JSON object (``log_path`` as text, ``gpu_indices`` as a list,
``cgroup`` as an object or null), mode 0600 like the log. A Slurm job's id
is ``slurm-<Slurm job id>`` (:func:`slurm_run_id`); the paths come from
:func:`log_path_of` and :func:`result_path`.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.runner.result import RunResult


def new_job_id(name: str) -> str:
    """Return a fresh job id for a job called ``name``: ``20250101-120000-train-1a2b3c``."""
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40]
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{stem or 'job'}-{secrets.token_hex(3)}"


def slurm_run_id(slurm_id: str) -> str:
    """Return the runner's id of the Slurm job ``slurm_id``: ``slurm-<Slurm job id>``."""
    return f"slurm-{slurm_id}"


def log_path_of(runs_dir: Path, job_id: str) -> Path:
    """Return the output file of job ``job_id`` in ``runs_dir``: ``<job id>.log``."""
    return runs_dir / f"{job_id}.log"


def result_path(log_path: Path) -> Path:
    """Return the result file of the run whose output is ``log_path`` (``x.log`` -> ``x.json``)."""
    return log_path.with_suffix(".json")


def write_result(result: RunResult, path: Path) -> None:
    """Write ``result`` as JSON to ``path`` atomically, owner-only (0o600) like the run's log.

    Raises
    ------
    OSError
        The file cannot be written (the previous one, if any, stays whole).
    """
    data = dataclasses.asdict(result)
    data["log_path"] = str(result.log_path)
    write_atomically(path, json.dumps(data, indent=1) + "\n", mode=0o600)


def read_result(path: Path) -> RunResult | None:
    """Return the result written at the end of a run, or None if there is none (yet).

    An unreadable or malformed file reads as None; the cgroup counters are not
    read back (None).
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    data["log_path"] = Path(data["log_path"])
    data["gpu_indices"] = tuple(data.get("gpu_indices") or ())
    data["cgroup"] = None
    return RunResult(**data)
