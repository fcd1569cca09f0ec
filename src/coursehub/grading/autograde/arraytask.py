"""One task of a batch's Slurm job array: ``python -m coursehub.grading.autograde.arraytask``.

``--manifest PATH`` names the batch's :class:`ArrayManifest` (JSON, written
by :mod:`coursehub.grading.autograde.arraybatch`); the task's index is
Slurm's ``SLURM_ARRAY_TASK_ID`` (sbatch(1), "OUTPUT ENVIRONMENT VARIABLES"),
and its share of the submissions is ``shares[index]``. In its folder
``task-<index>`` beside the manifest, the task

1. copies the batch's copy of the course gradebook to ``gradebook.db``,
   its own SQLite file, written by this task only
   (:mod:`coursehub.grading.autograde.arraymerge`);
2. checks that the kernels' sandbox starts on this node
   (:func:`coursehub.grading.sandbox.plan.check_sandbox`);
3. grades its share one submission after another exactly as a local batch
   of one slot does (:class:`coursehub.grading.autograde.workerbatch.WorkerBatch`,
   or :class:`coursehub.grading.autograde.running.JobBatch` where workers
   are not allowed), on a local backend without cgroups of its own (Slurm's
   job cgroup holds the task) and with admission slots of its own: the same
   sandbox account, allow-listed environment, per-submission time and
   memory limits and outcomes, with the gradebook, the outcomes file
   ``autograde-<assignment>.json`` and the logs in the task's folder.

It exits 0 once its share has outcomes (failed submissions included), 1
when it could not grade at all (the message says why).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.layout import CourseLayout

#: The variable in which Slurm gives an array task its index.
TASK_ID_VAR = "SLURM_ARRAY_TASK_ID"


@dataclass(frozen=True)
class TaskLayout(CourseLayout):
    """A course's layout whose gradebook and reports are one array task's folder, ``task_dir``."""

    task_dir: Path = field(default=Path("."))

    @property
    def db_url(self) -> str:
        """The task's own gradebook: ``sqlite:///<task_dir>/gradebook.db``."""
        return f"sqlite:///{self.task_dir / 'gradebook.db'}"

    @property
    def reports_dir(self) -> Path:
        """The task's folder: its outcomes file, progress record and logs."""
        return self.task_dir


@dataclass(frozen=True)
class ArrayManifest:
    """What every task of one batch's array reads: the course, the assignment, the shares.

    ``folder`` holds the manifest, the batch's copy of the gradebook
    (``gradebook.db``) and the tasks' folders; ``worker`` as
    :func:`coursehub.grading.autograde.batch.autograde_assignment`'s.
    """

    layout: CourseLayout
    assignment_id: str
    limits: AutogradeLimits
    shares: tuple[tuple[str, ...], ...]
    folder: Path
    worker: bool | None = None

    def task_dir(self, index: int) -> Path:
        """Return task ``index``'s folder: ``<folder>/task-<index>``."""
        return self.folder / f"task-{index}"

    def to_json(self) -> str:
        """Return the manifest as JSON text (paths as strings)."""
        course = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.layout).items()}
        data = {
            "course": course,
            "assignment_id": self.assignment_id,
            "limits": asdict(self.limits),
            "shares": [list(share) for share in self.shares],
            "folder": str(self.folder),
            "worker": self.worker,
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ArrayManifest:
        """Read a manifest written by :meth:`to_json`.

        Raises
        ------
        CoursehubError
            If the text is not such a manifest (names the missing field).
        """
        try:
            data = json.loads(text)
            course = dict(data["course"])
            for name in ("course_dir", "exchange_root"):
                course[name] = Path(course[name])
            return cls(
                CourseLayout(**course),
                str(data["assignment_id"]),
                AutogradeLimits(**data["limits"]),
                tuple(tuple(str(s) for s in share) for share in data["shares"]),
                Path(data["folder"]),
                data.get("worker"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CoursehubError(f"not an autograde array manifest ({exc!r})") from None


def task_index(environ: dict[str, str] | os._Environ[str], n_tasks: int) -> int:
    """Return this task's index from ``SLURM_ARRAY_TASK_ID``.

    Raises
    ------
    CoursehubError
        If the variable is missing (not run as an array task) or out of range.
    """
    text = environ.get(TASK_ID_VAR, "")
    if not text.isdigit() or int(text) >= n_tasks:
        raise CoursehubError(
            f"{TASK_ID_VAR}={text!r} is not a task of this array (0 to {n_tasks - 1})"
        )
    return int(text)


def grade_share(manifest: ArrayManifest, index: int) -> Path:
    """Grade task ``index``'s share into its own gradebook; return the task's folder.

    Raises
    ------
    CoursehubError
        If the sandbox cannot start on this node, or the batch's gradebook copy is missing.
    """
    from coursehub.grading.autograde.arraymerge import copy_gradebook
    from coursehub.grading.sandbox.plan import check_sandbox

    task_dir = manifest.task_dir(index)
    task_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    seed = manifest.folder / "gradebook.db"
    if not seed.is_file():
        raise CoursehubError(f"the batch's copy of the gradebook is missing: {seed}")
    copy_gradebook(seed, task_dir / "gradebook.db")
    layout = TaskLayout(**vars(manifest.layout), task_dir=task_dir)
    check_sandbox(layout)
    run_share(layout, manifest, manifest.shares[index])
    return task_dir


def run_share(layout: TaskLayout, manifest: ArrayManifest, share: Sequence[str]) -> None:
    """Grade ``share`` one submission at a time on a local backend of this task's own."""
    from coursehub.grading.autograde.pool import worker_allowed, worker_wanted
    from coursehub.grading.autograde.running import JobBatch
    from coursehub.grading.autograde.workerbatch import WorkerBatch
    from coursehub.runner.local import LocalBackend
    from coursehub.runner.slots import SlotPool
    from coursehub.sandbox.command import sandbox_mode
    from coursehub.sandbox.workdir import sweep_job_dirs

    limits = manifest.limits
    slots = SlotPool(layout.task_dir / "slots", limits.n_threads)
    backend = LocalBackend(layout.task_dir / "runs", slots=slots, use_cgroups=False)
    workers = worker_wanted(manifest.worker) and worker_allowed(sandbox_mode())
    kind = WorkerBatch if workers else JobBatch
    batch = kind(layout, manifest.assignment_id, limits, backend, 1, None)
    batch.total = len(share)
    batch.queue.extend(share)
    try:
        batch.run()
    except BaseException:
        batch.cancel()
        raise
    finally:
        sweep_job_dirs()


def main(argv: Sequence[str] | None = None) -> int:
    """Read ``--manifest``, grade this task's share; return 0, or 1 with one line on stderr."""
    parser = argparse.ArgumentParser(prog="python -m coursehub.grading.autograde.arraytask")
    parser.add_argument("--manifest", required=True, type=Path, help="the batch's manifest")
    args = parser.parse_args(argv)
    try:
        manifest = ArrayManifest.from_json(args.manifest.read_text("utf-8"))
        index = task_index(os.environ, len(manifest.shares))
        folder = grade_share(manifest, index)
    except (CoursehubError, OSError) as exc:
        print(f"coursehub: autograde array task: {exc}", file=sys.stderr)
        return 1
    print(f"[coursehub] array task {index}: {len(manifest.shares[index])} graded in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
