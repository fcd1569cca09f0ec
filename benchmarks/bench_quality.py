"""DP-Buffat-v1 or v2 in full: 1,000 trajectories, train, evaluate, compare with the baselines.

    .venv/bin/python benchmarks/bench_quality.py [--work-dir bench-quality] [--threads 2]
    .venv/bin/python benchmarks/bench_quality.py --version 2 [--preset class] [--model FILE]

Generates ``WORK_DIR/pendulum.npz`` (1,000 trajectories, seed 0) if it is
missing, trains the default LSTM in a fresh interpreter with explicit
threads (``python -m coursehub.pendulum.train``), evaluates it with
``coursehub pendulum evaluate`` and prints every metric beside persistence
and ridge AR(10), the goals, the training time and the thread count.
Exit status 1 if the model does not beat ridge AR(10) on every metric.

``--version 2`` scores on DP-Buffat-v2 (10-s forecasts) and prints each
median with its 95 % bootstrap interval over test trajectories; it exits 1
if the median chaotic VPT misses :data:`GOALS_V2_CHAOTIC_VPT_S`. ``--preset
class`` trains the class preset instead (its epochs and threads: the
minute of a class, :data:`coursehub.pendulum.config.RUN_PRESETS`);
``--model FILE`` scores an existing checkpoint without training.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from coursehub.pendulum.metrics import LYAPUNOV_EXPONENT
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
#: DP-Buffat-v2 goals on the median chaotic VPT, s: the default LSTM, the class preset.
GOALS_V2_CHAOTIC_VPT_S = {"default": 3.0, "class": 2.0}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("bench-quality"))
    parser.add_argument("--threads", type=int, default=max(1, min(2, int(effective_cpus()))))
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--max-windows", type=int, default=250_000, help="per epoch")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--version", type=int, choices=(1, 2), default=1, help="benchmark (1)")
    parser.add_argument(
        "--preset", choices=("class",), default=None, help="train this run preset instead"
    )
    parser.add_argument(
        "--model", type=Path, default=None, metavar="FILE", help="score FILE, do not train"
    )
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


def render(metrics: dict, train_s: float | None, n_threads: int) -> tuple[str, bool]:
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
    if train_s is not None:
        lines.append(f"training: {train_s:.0f} s wall with {n_threads} thread(s)")
    return "\n".join(lines), beats


def render_v2(
    metrics: dict, goal_s: float, train_s: float | None, n_threads: int
) -> tuple[str, bool]:
    """The DP-Buffat-v2 table (``median [low, high]``) and whether the chaotic VPT goal is met."""
    from coursehub.pendulum.evaluate import render_interval_table

    vpt = metrics["model"]["chaotic"]["vpt_s"]
    met = vpt["median"] is not None and vpt["median"] >= goal_s
    lines = [
        render_interval_table(metrics),
        f"LSTM chaotic VPT {vpt['median']:.2f} s [{vpt['low']:.2f}, {vpt['high']:.2f}], "
        f"{vpt['median'] * LYAPUNOV_EXPONENT:.2f} Lyapunov times; still valid at 10 s "
        f"(capped) in {metrics['model']['chaotic']['vpt_capped']:.1%} of chaotic starts; "
        f"goal >= {goal_s:g} s: {'met' if met else 'MISSED'}",
    ]
    if train_s is not None:
        lines.append(f"training: {train_s:.0f} s wall with {n_threads} thread(s)")
    return "\n".join(lines), met


def train_argv(args: argparse.Namespace, model: Path, data: Path) -> tuple[list[str], int]:
    """The training command line and its thread count: the preset's, or the default LSTM's."""
    common = ["--data", str(data), "--force", "--device", args.device, "--no-progress"]
    if args.preset is not None:
        from coursehub.pendulum.config import run_preset

        preset = run_preset(args.preset)
        epochs, threads = preset.train.n_epochs, preset.n_threads
        argv = [str(model), str(epochs), str(threads), "--preset", args.preset, *common]
        return ["coursehub.pendulum.train", *argv], threads
    argv = [str(model), str(args.epochs), str(args.threads), *common]
    return ["coursehub.pendulum.train", *argv, "--max-windows", str(args.max_windows)], args.threads


def main() -> int:
    args = parse_args()
    work = args.work_dir
    data, model, out = work / "pendulum.npz", work / "model.pt", work / "metrics.json"
    if args.version == 2:
        out = work / "metrics-v2.json"
    if args.model is not None:
        model = args.model
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
    train_s, threads = None, args.threads
    if args.model is None:
        argv, threads = train_argv(args, model, data)
        train_s = call(argv, threads)
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
            str(work / ("evaluation.png" if args.version == 1 else "evaluation-v2.png")),
            "--threads",
            str(args.threads),
            "--version",
            str(args.version),
        ],
        args.threads,
    )
    metrics = json.loads(out.read_text())["metrics"]
    if args.version == 2:
        goal = GOALS_V2_CHAOTIC_VPT_S["class" if args.preset == "class" else "default"]
        table, ok = render_v2(metrics, goal, train_s, threads)
    else:
        table, ok = render(metrics, train_s, threads)
    print(table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
