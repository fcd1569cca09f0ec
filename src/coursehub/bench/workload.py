"""One simulated student's training job: the pendulum LSTM for a fixed number of minibatch steps.

``python -m coursehub.bench.workload --data FILE --steps N [--batch-size B] [--device cpu]``

It trains the default forecaster of :mod:`coursehub.pendulum.model` (LSTM
over sin/cos features, 2 layers of 128 units) with Adam on minibatches of
windows from the training split of ``FILE`` (a dataset written once by the
benchmark with :func:`coursehub.pendulum.datafile.save_dataset` and read by
every student). It never sets a thread count itself: under the runner the
bootstrap and the thread variables decide; in a plain interpreter torch
starts one thread per host core, as in a notebook kernel.

Its last line is its own measure, the figures a student would see::

    coursehub-bench-workload {"train_s": 8.1, "cpu_s": 8.0, "torch_threads": 1, ...}

``train_s`` and ``cpu_s`` cover the training steps only (not the interpreter
start nor ``import torch``); ``cpu_s`` is this process's CPU time over all
its threads (``time.process_time``). :func:`parse_workload_output` reads it
back. torch is imported inside functions, so the parser is cheap to import.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError, UsageError

#: Prefix of the result line printed by the workload.
RESULT_PREFIX = "coursehub-bench-workload "
#: Windows per minibatch step (small batches: many small operations per step,
#: as in the course's notebooks, where thread contention costs the most).
DEFAULT_BATCH_SIZE = 64
#: Minibatch steps per student: about 6.5 s of training alone on one thread
#: of this project's 2-core build machine (4.6 s for 700 steps of batch 64,
#: measured with the machine quiet), 9-10 s for the whole job.
DEFAULT_STEPS = 1000


@dataclass(frozen=True)
class WorkloadReport:
    """What one run of the workload measured.

    Attributes
    ----------
    train_s
        Wall-clock seconds of the training steps.
    cpu_s
        CPU seconds of the process (all threads) over the same steps.
    torch_threads
        ``torch.get_num_threads()`` during training.
    steps
        Minibatch steps done.
    final_loss
        Training loss of the last step (MSE in the model's step units).
    device
        ``"cpu"`` or ``"cuda"``.
    preempted
        Involuntary context switches of the process over the steps
        (``getrusage`` ``ru_nivcsw``, all threads): how often the kernel
        took a CPU away from it. None when not reported.
    migrations
        Moves of its threads from one CPU to another over the steps (sum of
        ``se.nr_migrations`` in ``/proc/self/task/*/sched``, Linux with
        ``CONFIG_SCHED_DEBUG``), None where the kernel does not show it.
    waited_s
        Seconds its threads spent runnable but waiting for a CPU over the
        steps (:func:`run_queue_wait_s`), None where the kernel does not
        show it. Unlike elapsed against CPU time, this does not mistake a
        thread pool that cannot keep every thread busy for contention.
    """

    train_s: float
    cpu_s: float
    torch_threads: int
    steps: int
    final_loss: float
    device: str = "cpu"
    preempted: int | None = None
    migrations: int | None = None
    waited_s: float | None = None


def render_result_line(report: WorkloadReport) -> str:
    """Return the result line: :data:`RESULT_PREFIX` then the report as JSON."""
    values = {
        "train_s": round(report.train_s, 4),
        "cpu_s": round(report.cpu_s, 4),
        "torch_threads": report.torch_threads,
        "steps": report.steps,
        "final_loss": report.final_loss,
        "device": report.device,
        "preempted": report.preempted,
        "migrations": report.migrations,
        "waited_s": None if report.waited_s is None else round(report.waited_s, 4),
    }
    return RESULT_PREFIX + json.dumps(values)


def parse_workload_output(text: str) -> WorkloadReport:
    """Return the report of the last result line found in a workload's output.

    Parameters
    ----------
    text
        Everything the workload wrote (other lines, e.g. the runner's, are ignored).

    Raises
    ------
    CoursehubError
        If no well-formed result line is present (the job failed or was killed).
    """
    for line in reversed(text.splitlines()):
        if not line.startswith(RESULT_PREFIX):
            continue
        try:
            values = json.loads(line[len(RESULT_PREFIX) :])
            return WorkloadReport(
                train_s=float(values["train_s"]),
                cpu_s=float(values["cpu_s"]),
                torch_threads=int(values["torch_threads"]),
                steps=int(values["steps"]),
                final_loss=float(values["final_loss"]),
                device=str(values.get("device", "cpu")),
                preempted=_optional_int(values.get("preempted")),
                migrations=_optional_int(values.get("migrations")),
                waited_s=_optional_float(values.get("waited_s")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CoursehubError(f"malformed workload result line {line!r}: {exc}") from exc
    tail = " | ".join(text.strip().splitlines()[-3:]) or "no output"
    raise CoursehubError(f"the workload printed no result line (last output: {tail})")


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def sum_over_threads(task_dir: Path, name: str, parse: Callable[[str], int | None]) -> int | None:
    """Return the sum of ``parse(text of <task_dir>/<tid>/<name>)`` over the threads.

    ``parse`` returns None where the file does not show the figure. Threads
    that ended meanwhile, and unreadable or malformed files, are skipped;
    None when no thread showed it.
    """
    total, seen = 0, False
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            value = parse((task / name).read_text())
        except (OSError, IndexError, ValueError):
            continue
        if value is not None:
            total, seen = total + value, True
    return total if seen else None


def run_queue_wait_s(task_dir: Path = Path("/proc/self/task")) -> float | None:
    """Return the seconds this process's threads have waited on a run queue, None if not shown.

    Sums the second field ("time spent waiting on a runqueue", nanoseconds)
    of ``/proc/self/task/<tid>/schedstat`` over the live threads (Linux
    kernel documentation, ``Documentation/scheduler/sched-stats.rst``). Time
    a thread was runnable but held off the CPU by other work, or by its
    cgroup's CPU quota, counts.
    """
    total_ns = sum_over_threads(task_dir, "schedstat", lambda text: int(text.split()[1]))
    return None if total_ns is None else total_ns / 1e9


def count_migrations(task_dir: Path = Path("/proc/self/task")) -> int | None:
    """Return the CPU migrations of this process's threads so far, None if not shown.

    Sums ``se.nr_migrations`` over ``/proc/self/task/<tid>/sched`` (the
    scheduler's debug file, ``kernel/sched/debug.c``).
    """

    def migrations(text: str) -> int | None:
        for line in text.splitlines():
            if line.startswith("se.nr_migrations"):
                return int(line.split(":")[1])
        return None

    return sum_over_threads(task_dir, "sched", migrations)


def train_steps(data: Path, steps: int, batch_size: int, device_name: str) -> WorkloadReport:
    """Train the forecaster for ``steps`` minibatch steps on the training split of ``data``.

    Raises
    ------
    UsageError
        If the dataset cannot be read or has no training trajectory.
    """
    import torch

    from coursehub.pendulum.config import ModelConfig, TrainConfig
    from coursehub.pendulum.datafile import load_dataset
    from coursehub.pendulum.fitting import WindowSource, build_state, train_epoch
    from coursehub.pendulum.model import fit_scaler

    ds = load_dataset(data)
    states = ds.states[ds.indices("train")]
    if len(states) == 0:
        raise UsageError(f"dataset {data} has no training trajectories")
    device = torch.device(device_name)
    model_cfg = ModelConfig()
    cfg = TrainConfig(batch_size=batch_size, seed=0)
    state = build_state(model_cfg, fit_scaler(model_cfg, states), cfg, device)
    source = WindowSource(states, model_cfg.window + cfg.rollout_steps, device)
    losses: list[float] = []
    preempted_before, migrations_before = _nivcsw(), count_migrations()
    waited_before = run_queue_wait_s()
    started, cpu_started = time.perf_counter(), time.process_time()
    while state.global_step < steps:
        remaining = (steps - state.global_step) * batch_size
        epoch_cfg = replace(cfg, max_windows=min(remaining, source.n_windows))
        train_epoch(state, source, epoch_cfg, lambda: False, lambda _n, loss: losses.append(loss))
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    migrations_after, waited_after = count_migrations(), run_queue_wait_s()
    waited = None
    if waited_before is not None and waited_after is not None:
        waited = max(0.0, waited_after - waited_before)
    migrations = None
    if migrations_before is not None and migrations_after is not None:
        migrations = migrations_after - migrations_before
    return WorkloadReport(
        train_s,
        cpu_s,
        torch.get_num_threads(),
        state.global_step,
        losses[-1],
        device.type,
        _nivcsw() - preempted_before,
        migrations,
        waited,
    )


def _nivcsw() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def build_parser() -> argparse.ArgumentParser:
    """Return the workload's argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m coursehub.bench.workload",
        description="Train the pendulum LSTM for a fixed number of minibatch steps.",
    )
    parser.add_argument("--data", type=Path, required=True, help="dataset file (.npz)")
    parser.add_argument("--steps", type=int, required=True, help="minibatch steps (>= 1)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the workload; print its result line; return the exit status (2 on bad input)."""
    args: Any = build_parser().parse_args(argv)
    try:
        if args.steps < 1 or args.batch_size < 1:
            raise UsageError(
                f"--steps and --batch-size must be >= 1, got {args.steps}, {args.batch_size}"
            )
        report = train_steps(args.data, args.steps, args.batch_size, args.device)
    except CoursehubError as exc:
        print(f"coursehub-bench-workload: error: {exc}", file=sys.stderr)
        return 2
    print(render_result_line(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
