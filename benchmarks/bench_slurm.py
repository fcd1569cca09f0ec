"""The Slurm backend's costs: submission-to-start latency, and its overhead over the local backend.

    scripts/slurm-single-node start && eval "$(scripts/slurm-single-node env)"
    .venv/bin/python benchmarks/bench_slurm.py [--latency-jobs 10] [--repeats 5]

1. Latency: ``--latency-jobs`` one-line batch jobs (``sbatch --wrap``), one
   at a time on the idle cluster; each job writes the time it started
   (``time.time()`` on the same host) and the submission time is taken just
   before ``sbatch`` runs. This is Slurm's own scheduling and launch delay,
   without the runner.
2. Overhead: the same small training job (``coursehub.pendulum.train``, one
   epoch of ``--windows`` windows, 2 threads) through the local backend and
   through the Slurm backend, interleaved ``local, slurm, local, ...``
   ``--repeats`` times so that a drift of the shared machine touches both
   alike; the figure is the wall-clock time from the call to the result, as
   a user sees it, and the difference slurm - local of each pair.

Medians come with a 95 % percentile bootstrap interval
(:func:`coursehub.bench.stats.bootstrap_median_interval`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursehub.bench.stats import bootstrap_median_interval
from coursehub.runner.api import run
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from coursehub.runner.slurm.backend import SlurmBackend


def describe(name: str, values: list[float]) -> str:
    low, high = bootstrap_median_interval(values)
    return (
        f"{name}: median {statistics.median(values):.3f} s "
        f"[95% CI {low:.3f}, {high:.3f}] over {len(values)} "
        f"(min {min(values):.3f}, max {max(values):.3f})"
    )


def latency(n_jobs: int, work: Path) -> list[float]:
    """Return, per job, seconds from just before ``sbatch`` to the job's first command."""
    delays = []
    for i in range(n_jobs):
        mark = work / f"start-{i}"
        wrap = f'{sys.executable} -c \'import time; open("{mark}", "w").write(str(time.time()))\''
        submitted = time.time()
        subprocess.run(
            ["sbatch", "--parsable", "-o", "/dev/null", "--wrap", wrap],
            check=True,
            capture_output=True,
        )
        deadline = time.monotonic() + 120
        while not mark.is_file() or not mark.read_text():
            if time.monotonic() > deadline:
                raise SystemExit(f"job {i} did not start within 120 s")
            time.sleep(0.01)
        delays.append(float(mark.read_text()) - submitted)
        while subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip():
            time.sleep(0.05)  # the next job finds the node idle
    return delays


def overhead(repeats: int, windows: int, work: Path) -> tuple[list[float], list[float]]:
    """Return wall-clock seconds of the training job through each backend, interleaved."""
    data = work / "pendulum.npz"
    subprocess.run(
        [
            *(sys.executable, "-m", "coursehub", "pendulum", "generate", "--out", str(data)),
            *("--n-trajectories", "16", "--no-progress"),
        ],
        check=True,
        capture_output=True,
    )
    args = [str(work / "model.pt"), "1", "2", "--data", str(data), "--no-progress", "--force"]
    args += ["--max-windows", str(windows)]
    local = LocalBackend(work / "runs", SlotPool(work / "slots", 2))
    slurm = SlurmBackend(runs_dir=work / "runs")
    times: dict[str, list[float]] = {"local": [], "slurm": []}
    for _ in range(repeats):
        for name, backend in (("local", local), ("slurm", slurm)):
            started = time.monotonic()
            result = run(
                "coursehub.pendulum.train",
                args,
                module=True,
                backend=backend,
                n_threads=2,
                mem_limit="2G",
                on_output=lambda text: None,
            )
            if not result.ok:
                raise SystemExit(f"{name} run failed: see {result.log_path}")
            times[name].append(time.monotonic() - started)
    return times["local"], times["slurm"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-jobs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--windows", type=int, default=1000, help="training windows per job")
    args = parser.parse_args()
    if subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0:
        print("no Slurm reachable: scripts/slurm-single-node start, then set SLURM_CONF")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        print(describe("submission to start (sbatch, idle node)", latency(args.latency_jobs, work)))
        local, slurm = overhead(args.repeats, args.windows, work)
        print(describe("training job, local backend", local))
        print(describe("training job, Slurm backend", slurm))
        print(
            describe(
                "Slurm - local, same repeat", [s - loc for s, loc in zip(slurm, local, strict=True)]
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
