"""DP-Buffat-v1 in full: 1,000 trajectories, train, evaluate, compare with the baselines.

    .venv/bin/python benchmarks/bench_quality.py [--work-dir bench-quality] [--threads 2]

Generates ``WORK_DIR/pendulum.npz`` (1,000 trajectories, seed 0) if it is
missing, trains the default LSTM in a fresh interpreter with explicit
threads (``python -m coursehub.pendulum.train``), evaluates it with
``coursehub pendulum evaluate`` and prints every metric beside persistence
and ridge AR(10), the goals, the training time and the thread count.
Exit status 1 if the model does not beat ridge AR(10) on every metric.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from coursehub.resources.cpus import effective_cpus
from coursehub.resources.threads import thread_env

# figure -> (better is "lower" or "higher", goal or None); goals apply to the medians.
FIGURES = {
    "nrmse_1": ("lower", 0.005),
    "nrmse_10": ("lower", None),
    "nrmse_50": ("lower", None),
    "nrmse_100": ("lower", None),
    "vpt_s": ("higher", None),
    "vpt_lyapunov": ("higher", None),
    "energy_drift": ("lower", 0.05),
}
GOALS_VPT_S = {"chaotic": 1.0, "regular": 100 / 30}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("bench-quality"))
    parser.add_argument("--threads", type=int, default=max(1, min(2, int(effective_cpus()))))
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--max-windows", type=int, default=250_000, help="per epoch")
    parser.add_argument("--device", default="auto")
    return parser.parse_args()


def call(argv: list[str], n_threads: int) -> float:
    """Run ``python -m ...`` with the thread environment; return its wall time in s."""
    t0 = time.perf_counter()
    env = {**os.environ, **thread_env(n_threads)}
    subprocess.run([sys.executable, "-m", *argv], env=env, check=True)
    return time.perf_counter() - t0


def goal_of(group: str, figure: str) -> float | None:
    if figure == "vpt_s":
        return GOALS_VPT_S.get(group)
    return FIGURES[figure][1] if group == "all" else None


def render(metrics: dict, train_s: float, n_threads: int) -> tuple[str, bool]:
    """The comparison table and whether the model beats ridge AR(10) on every median."""
    lines = [f"{'figure (median)':<24}{'LSTM':>11}{'persist.':>11}{'ridge':>11}{'goal':>9}  ok"]
    beats = True
    for group in ("all", "regular", "chaotic"):
        for figure, (better, _) in FIGURES.items():
            m, p, r = (
                metrics[n][group][figure]["median"] for n in ("model", "persistence", "ridge_ar10")
            )
            win = m <= r if better == "lower" else m >= r
            beats &= win
            goal = goal_of(group, figure)
            met = goal is None or (m <= goal if better == "lower" else m >= goal - 1e-9)
            mark = ("beats ridge" if win else "LOSES to ridge") + ("" if met else ", misses goal")
            g = "" if goal is None else f"{goal:.3g}"
            lines.append(f"{group + ' ' + figure:<24}{m:>11.4g}{p:>11.4g}{r:>11.4g}{g:>9}  {mark}")
    lines.append(f"training: {train_s:.0f} s wall with {n_threads} thread(s)")
    return "\n".join(lines), beats


def main() -> int:
    args = parse_args()
    work = args.work_dir
    data, model, out = work / "pendulum.npz", work / "model.pt", work / "metrics.json"
    if not data.exists():
        call(
            [
                "coursehub",
                "pendulum",
                "generate",
                "--n-trajectories",
                "1000",
                "--seed",
                "0",
                "--out",
                str(data),
            ],
            1,
        )
    train_s = call(
        [
            "coursehub.pendulum.train",
            str(model),
            str(args.epochs),
            str(args.threads),
            "--data",
            str(data),
            "--force",
            "--max-windows",
            str(args.max_windows),
            "--device",
            args.device,
            "--no-progress",
        ],
        args.threads,
    )
    call(
        [
            "coursehub",
            "pendulum",
            "evaluate",
            str(model),
            "--data",
            str(data),
            "--json",
            str(out),
            "--plot",
            str(work / "evaluation.png"),
            "--threads",
            str(args.threads),
        ],
        args.threads,
    )
    table, beats = render(json.loads(out.read_text())["metrics"], train_s, args.threads)
    print(table)
    return 0 if beats else 1


if __name__ == "__main__":
    sys.exit(main())
