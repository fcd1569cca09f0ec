"""A batch graded as one Slurm job array, its gradebooks merged by the submitting side.

With the Slurm backend, :func:`coursehub.grading.autograde.batch.autograde_assignment`
grades with an :class:`ArrayBatch`: the pending submissions are cut into
shares of ``$COURSEHUB_GRADING_ARRAY_SHARE`` (default 8,
:func:`coursehub.grading.autograde.arrayplan.plan_shares`), and one
``sbatch --array=0-(N-1)%parallel`` job grades them, task ``i`` its share
``i`` (:mod:`coursehub.grading.autograde.arraytask`; ``%parallel`` only
when ``--parallel`` is below N). In a private folder of the course's
``coursehub/`` folder, ``array-<assignment>-*`` (mode 0700), this side
writes the manifest and a copy of the course gradebook; the tasks write
their own gradebooks, outcomes and logs under ``task-<i>/``.

Each task runs with the allow-listed environment of a grading job
(:func:`coursehub.sandbox.env.plan_sandbox_env`, ``--export=NONE``: no
token, no catalog URL), the course's threads and memory per task, and a
``--time`` of its share's limits (``timeout_s`` per submission, plus
:data:`coursehub.grading.autograde.pool.WORKER_SLACK_S`).

Followed with ``scontrol show job -o`` (one line per task), each task that
ends is collected at once: its gradebook merged into the course's
(:func:`coursehub.grading.autograde.arraymerge.merge_gradebook`), its
outcomes added, the logs of its submissions copied beside those of a local
batch; the gradebook copies are removed once merged (the folder keeps the
manifest and each task's log, ``task-<i>.log``). A submission its task
did not grade (the task failed, was killed or cancelled) is an ``error``
outcome naming the task, Slurm's state of it and the last line of its log;
the next run grades it again. Interrupted, or with a task that can never
start (a pending reason no wait removes,
:func:`coursehub.runner.slurm.plan.plan_never_starts`), the batch cancels
the array (``scancel``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from coursehub.grading.autograde.arrayplan import (
    ARRAY_TASK_MODULE,
    array_finished,
    parse_array_states,
    pending_reasons,
    plan_missing,
    plan_shares,
    render_array_option,
    render_array_script,
    share_size,
)
from coursehub.grading.autograde.arraytask import ArrayManifest, TaskLayout
from coursehub.grading.autograde.job import AutogradeLimits, zero_outcome
from coursehub.grading.autograde.outcomes import HOST_ERROR, load_outcomes
from coursehub.grading.autograde.running import POLL_S, JobBatch
from coursehub.grading.layout import CourseLayout
from coursehub.runner.slurm.commands import (
    FINAL_STATES,
    SlurmError,
    SlurmUnreachableError,
    UnreachableDeadline,
    run_slurm,
    sbatch,
    scancel,
)


def array_env(environ: Any) -> dict[str, str]:
    """Return the environment of every array task (pure but for the data folder's default).

    The grading job's allow-list (:func:`coursehub.sandbox.env.plan_sandbox_env`)
    with ``PYTHONSAFEPATH`` (the task runs in the course directory), plus the
    paths a task needs to hide the same folders and use the same sandbox
    account as this side: ``COURSEHUB_DATA_DIR``, ``COURSEHUB_SLOTS_DIR``
    (when set) and ``COURSEHUB_GRADER_USER``.
    """
    from coursehub.sandbox.account import SANDBOX_USER_VAR, sandbox_user_name
    from coursehub.sandbox.env import plan_sandbox_env
    from coursehub.settings import data_dir

    env = {**plan_sandbox_env(environ), "PYTHONSAFEPATH": "1"}
    env["COURSEHUB_DATA_DIR"] = str(data_dir(environ))
    env[SANDBOX_USER_VAR] = sandbox_user_name(environ)
    if environ.get("COURSEHUB_SLOTS_DIR"):
        env["COURSEHUB_SLOTS_DIR"] = environ["COURSEHUB_SLOTS_DIR"]
    return env


def array_spec(layout: CourseLayout, assignment: str, limits: AutogradeLimits, most: int) -> Any:
    """Return the runner ``JobSpec`` of one array task grading up to ``most`` submissions."""
    from coursehub.grading.autograde.pool import WORKER_SLACK_S
    from coursehub.runner.api import make_spec

    return make_spec(
        ARRAY_TASK_MODULE,
        module=True,
        env=array_env(os.environ),
        inherit_env=False,
        name=f"autograde-{assignment}",
        n_threads=limits.n_threads,
        mem_limit=limits.mem_limit,
        timeout_s=limits.timeout_s * max(1, most) + WORKER_SLACK_S,
        cwd=layout.course_dir,
    )


class ArrayBatch(JobBatch):
    """One batch as a Slurm job array (``backend``: a ``SlurmBackend``; ``workers``: ``%slots``)."""

    #: ``worker`` of :func:`coursehub.grading.autograde.batch.autograde_assignment`, per task.
    worker: bool | None = None
    job_id = ""
    manifest: ArrayManifest | None = None
    spec: Any = None

    def run(self) -> None:
        """Submit the array, collect each task as it ends, report what no task graded."""
        students = list(self.queue)
        self.queue.clear()
        if not students:
            return
        self.manifest = self.write_manifest(students)
        self.job_id = self.submit(self.manifest)
        self.running = {student: self.job_id for student in students}
        self.publish("running")
        collected: set[str] = set()
        deadline = UnreachableDeadline(self.backend.unreachable_give_up_s)
        while True:
            states = self.task_states(deadline)
            for task, state in (states or {}).items():
                if task.isdigit() and state in FINAL_STATES and task not in collected:
                    self.collect_task(int(task), state)
                    collected.add(task)
            if states is None or array_finished(states):
                break
            time.sleep(max(POLL_S, self.backend.poll_s))
        for index in range(len(self.manifest.shares)):
            if str(index) not in collected:
                self.collect_task(index, (states or {}).get(str(index), ""))
        (self.manifest.folder / "gradebook.db").unlink(missing_ok=True)

    def write_manifest(self, students: list[str]) -> ArrayManifest:
        """Make the batch's folder with a copy of the gradebook and the manifest; return it."""
        from coursehub.grading.autograde.arraymerge import copy_gradebook

        base = self.layout.reports_dir
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"array-{self.assignment}-", dir=base))
        copy_gradebook(self.layout.gradebook_path, folder / "gradebook.db")
        shares = plan_shares(students, share_size(os.environ))
        manifest = ArrayManifest(
            self.layout, self.assignment, self.limits, shares, folder, self.worker
        )
        (folder / "manifest.json").write_text(manifest.to_json(), encoding="utf-8")
        return manifest

    def submit(self, manifest: ArrayManifest) -> str:
        """``sbatch`` the array of ``manifest``; return its job id (nothing queued on error)."""
        from coursehub.runner.slurm.plan import describe_request

        most = max(len(share) for share in manifest.shares)
        self.spec = spec = array_spec(self.layout, self.assignment, self.limits, most)
        slots = self.workers if self.workers < len(manifest.shares) else None
        script = render_array_script(
            spec,
            self.backend.placement,
            str(manifest.folder / "task-%a.log"),
            render_array_option(len(manifest.shares), slots),
            str(manifest.folder / "manifest.json"),
            self.backend.python,
        )
        placement = self.backend.placement
        return sbatch(script, describe_request(spec), placement.partition)

    def task_states(self, deadline: UnreachableDeadline) -> dict[str, str] | None:
        """Return ``{task: state}`` of the array now; None once Slurm has forgotten it.

        Raises
        ------
        coursehub.runner.slurm.commands.SlurmUnreachableError
            The controller did not answer for ``unreachable_give_up_s`` seconds.
        """
        asked_at = time.monotonic()
        try:
            out = run_slurm(
                ["scontrol", "show", "job", "-o", self.job_id],
                timeout_s=deadline.call_timeout_s(15),
            )
        except SlurmUnreachableError:
            deadline.failed(asked_at)
            if deadline.expired():
                raise
            return {"": "UNREACHABLE"}
        except SlurmError as exc:
            if "invalid job id" in str(exc).lower():
                return None
            raise
        deadline.answered()
        self.check_pending(out)
        return parse_array_states(out)

    def check_pending(self, text: str) -> None:
        """Cancel the array if a pending task can never start (its reason names a permanent cause).

        Raises
        ------
        coursehub.runner.slurm.commands.SlurmError
            Naming the job and the cause
            (:func:`coursehub.runner.slurm.plan.plan_never_starts`).
        """
        from coursehub.runner.slurm.plan import plan_never_starts

        for record in pending_reasons(text):
            never = plan_never_starts(self.job_id, record.get("Reason", ""), self.spec, record)
            if never:
                raise SlurmError(never)

    def collect_task(self, index: int, state: str) -> None:
        """Merge task ``index``'s gradebook, add its outcomes, report its missing submissions."""
        from coursehub.grading.autograde.arraymerge import merge_gradebook
        from coursehub.grading.autograde.gradebook import gradebook_url

        assert self.manifest is not None
        share = self.manifest.shares[index]
        task = TaskLayout(**vars(self.layout), task_dir=self.manifest.task_dir(index))
        graded = [o for o in load_outcomes(task, self.assignment) if o.student_id in share]
        copy = task.task_dir / "gradebook.db"
        if graded and copy.is_file():
            merge_gradebook(
                task.db_url,
                gradebook_url(self.layout),
                self.layout.course_id,
                self.assignment,
                [o.student_id for o in graded],
            )
        copy.unlink(missing_ok=True)  # merged: the course's gradebook holds it now
        for outcome in graded:
            self.copy_log(task, outcome.student_id)
            self.running.pop(outcome.student_id, None)
            self.add(outcome)
        log = self.manifest.folder / f"task-{index}.log"
        ids = [o.student_id for o in graded]
        missing = plan_missing(self.job_id, index, share, state, ids, last_line(log))
        for student, reason in missing.items():
            self.running.pop(student, None)
            self.add(zero_outcome(self.layout, self.assignment, student, HOST_ERROR, reason))

    def copy_log(self, task: TaskLayout, student: str) -> None:
        """Copy one submission's log from the task's folder to where a local batch keeps it."""
        from coursehub.grading.autograde.job import job_log_path

        source = job_log_path(task, self.assignment, student)
        if source.is_file():
            target = job_log_path(self.layout, self.assignment, student)
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copyfile(source, target)

    def cancel(self) -> None:
        """``scancel`` the array (its pending tasks withdrawn, its running ones stopped)."""
        if self.job_id:
            with contextlib.suppress(SlurmError):
                scancel(self.job_id)
        self.running.clear()


def last_line(path: Path) -> str:
    """Return the last non-empty line of a task's log (at most 300 characters; "" if none)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    text = [line.strip() for line in lines if line.strip()]
    return text[-1][:300] if text else ""
