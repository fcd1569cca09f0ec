"""The pure plans of a batch graded as one Slurm job array: shares, batch script, task states.

:func:`plan_shares` cuts the submissions into one share per array task;
:func:`render_array_script` writes the batch script of the whole batch
(``sbatch --array=0-(N-1)%slots``, sbatch(1) ``--array``: one job id, task
``i`` reads its index from ``SLURM_ARRAY_TASK_ID``);
:func:`parse_array_states` reads ``scontrol show job -o`` of the array, one
line per task; :func:`plan_missing` says which task failed and which of
its submissions are missing after it ended. None of them runs a command.
"""

from __future__ import annotations

import math
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence

from coursehub.errors import UsageError
from coursehub.runner.job import JobSpec
from coursehub.runner.jobenv import plan_env
from coursehub.runner.slurm.commands import FINAL_STATES, parse_scontrol_record
from coursehub.runner.slurm.plan import SlurmPlacement, render_sbatch_args, render_sbatch_line

#: The module each array task runs (:mod:`coursehub.grading.autograde.arraytask`).
ARRAY_TASK_MODULE = "coursehub.grading.autograde.arraytask"
#: The setting: submissions graded one after another by one array task.
SHARE_VAR = "COURSEHUB_GRADING_ARRAY_SHARE"
#: Submissions per array task when the setting is not given.
DEFAULT_SHARE = 8


def share_size(environ: Mapping[str, str]) -> int:
    """Return ``$COURSEHUB_GRADING_ARRAY_SHARE`` (default :data:`DEFAULT_SHARE`).

    Raises
    ------
    UsageError
        If the value is not a whole number of at least 1.
    """
    text = environ.get(SHARE_VAR, "").strip()
    if not text:
        return DEFAULT_SHARE
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{SHARE_VAR} must be a whole number of at least 1, got {text!r}")
    return int(text)


def plan_shares(students: Sequence[str], per_task: int) -> tuple[tuple[str, ...], ...]:
    """Cut ``students`` into ``ceil(n / per_task)`` shares of nearly equal size, in order (pure).

    ``plan_shares(["a", "b", "c"], 2) == (("a", "b"), ("c",))``; sizes differ
    by at most one (five submissions, ``per_task`` 4: shares of 3 and 2).

    Raises
    ------
    UsageError
        If ``per_task`` < 1.
    """
    if per_task < 1:
        raise UsageError(f"submissions per array task must be at least 1, got {per_task}")
    n_tasks = math.ceil(len(students) / per_task)
    if n_tasks == 0:
        return ()
    base, extra = divmod(len(students), n_tasks)
    shares, start = [], 0
    for index in range(n_tasks):
        size = base + (1 if index < extra else 0)
        shares.append(tuple(students[start : start + size]))
        start += size
    return tuple(shares)


def render_array_option(n_tasks: int, slots: int | None) -> str:
    """Return sbatch's ``--array=0-(N-1)`` with ``%slots`` when fewer than N run at once (pure).

    sbatch(1) ``--array``: "A maximum number of simultaneously running tasks
    from the job array may be specified using a "%" separator."

    Raises
    ------
    UsageError
        If ``n_tasks`` < 1 or ``slots`` < 1.
    """
    if n_tasks < 1:
        raise UsageError(f"a job array needs at least one task, got {n_tasks}")
    if slots is not None and slots < 1:
        raise UsageError(f"--parallel must be at least 1, got {slots}")
    throttle = f"%{slots}" if slots is not None and slots < n_tasks else ""
    return f"--array=0-{n_tasks - 1}{throttle}"


def render_array_script(
    spec: JobSpec,
    placement: SlurmPlacement,
    output: str,
    array: str,
    manifest: str,
    python: str = sys.executable,
) -> str:
    """Return the batch script of a batch's job array (pure: same input, same text).

    ``spec`` gives the resources of one task (``--cpus-per-task``, ``--mem``,
    ``--time`` of :func:`coursehub.runner.slurm.plan.render_sbatch_args`) and
    its environment (:func:`coursehub.runner.jobenv.plan_env`, ``--export=NONE``
    when ``spec.inherit_env`` is False); ``output`` may hold Slurm's ``%A``
    (array job id) and ``%a`` (task index); ``array`` is
    :func:`render_array_option`. Each task runs ``python -m``
    :data:`ARRAY_TASK_MODULE` ``--manifest MANIFEST``.
    """
    env = plan_env(spec, {})
    lines = ["#!/bin/bash", f"# coursehub autograde array {spec.display_name}"]
    options = [*render_sbatch_args(spec, placement, output), array]
    lines += [f"#SBATCH {render_sbatch_line(arg)}" for arg in options]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    command = [python, "-m", ARRAY_TASK_MODULE, "--manifest", manifest]
    lines.append("exec " + " ".join(shlex.quote(word) for word in command))
    return "\n".join(lines) + "\n"


def parse_array_states(text: str) -> dict[str, str]:
    """Return ``{task index: JobState}`` from ``scontrol show job -o`` of a job array (pure).

    One line per task; tasks not started yet share one line whose
    ``ArrayTaskId`` is a range (``2-5%2``), kept as it is. A line without
    ``ArrayTaskId`` (a job that is no array) is left out.
    """
    states: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        record = parse_scontrol_record(line)
        task = record.get("ArrayTaskId")
        if task:
            states[task] = record.get("JobState", "").split()[0] if record.get("JobState") else ""
    return states


def pending_reasons(text: str) -> list[dict[str, str]]:
    """Return the ``scontrol show job -o`` records of the array's pending tasks (pure)."""
    records = [parse_scontrol_record(line) for line in text.splitlines() if line.strip()]
    return [r for r in records if r.get("JobState", "").startswith("PENDING")]


def array_finished(states: Mapping[str, str]) -> bool:
    """Whether every task of the array has ended (no pending range, every state final) (pure)."""
    return all(task.isdigit() and state in FINAL_STATES for task, state in states.items())


def plan_missing(
    job_id: str,
    index: int,
    share: Sequence[str],
    state: str,
    graded: Iterable[str],
    log_line: str = "",
) -> dict[str, str]:
    """Return ``{student_id: why it has no outcome}`` for each of task ``index``'s ungraded (pure).

    ``graded``: the students whose outcome the task wrote; ``state``: Slurm's
    state of the task ("" once Slurm no longer knows it); ``log_line``: the
    last line of the task's log. ``"not graded: array task 1 of Slurm job 42
    ended FAILED (coursehub: ...); run the same command again"``.
    """
    done = set(graded)
    how = f"ended {state}" if state else "ended (Slurm no longer knows how)"
    said = f" ({log_line})" if log_line else ""
    reason = (
        f"not graded: array task {index} of Slurm job {job_id} {how}{said}; "
        "run the same command again"
    )
    return {student: reason for student in share if student not in done}
