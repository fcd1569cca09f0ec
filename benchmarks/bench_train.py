"""Training throughput (windows per second) by thread count, batch size and architecture.

    .venv/bin/python benchmarks/bench_train.py [--steps 40] [--rounds 5] [--no-grid]

Each configuration runs in a fresh interpreter whose thread variables and
``torch.set_num_threads`` are set before torch loads, on the same synthetic
trajectories, for a fixed number of optimiser steps after a short warm-up.

The grid: the default LSTM at 1 and 2 threads x batch sizes 1, 64 and 256
(ten times as many steps at batch size 1), and the course's model
(LSTM(4 -> 100) on raw states, batch size 1) at each thread count; one run
each, so rough on a shared machine.

The class comparison: the course's original setup (its LSTM at batch size 1,
1 thread, the ``course`` presets) against the ``class`` run preset (its
model, batch size and threads, :data:`coursehub.pendulum.config.RUN_PRESETS`),
measured in ``--rounds`` interleaved rounds (the order alternates from round
to round, so drifts in the machine's load fall on both alike). It prints the
median samples/s of each with its range over rounds, and the speed-up: the
median of the per-round ratios with their range. Exit status 1 if that
median is below ``GOAL_SPEEDUP``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace

from coursehub.resources.threads import thread_env

THREADS = (1, 2)
BATCH_SIZES = (1, 64, 256)
#: Goal for the speed-up of the class preset over the course's original setup, samples/s.
GOAL_SPEEDUP = 30.0
#: Steps timed at batch size 1 per step timed at a larger batch size.
BATCH1_FACTOR = 10


def child(arch: str, batch_size: int, n_threads: int, steps: int) -> dict[str, float]:
    """Time ``steps`` optimiser steps in this (fresh) process; return the figures.

    ``arch`` is ``lstm`` or ``course`` (that architecture's model preset,
    noise 0.1) or ``preset:NAME``, a run preset's model and optimisation
    (``batch_size`` is then the preset's). Returns ``samples_per_s``
    (windows per second), ``wall_s`` and ``cpu_s`` of the timed steps.
    """
    from coursehub.pendulum.train import apply_threads

    apply_threads(n_threads)
    import numpy as np
    import torch

    from coursehub.pendulum import fitting
    from coursehub.pendulum.config import ModelConfig, TrainConfig, run_preset
    from coursehub.pendulum.model import fit_scaler
    from coursehub.pendulum.physics import integrate_rk4

    rng = np.random.default_rng(0)
    y0 = np.zeros((16, 4))
    y0[:, [0, 2]] = rng.uniform(-np.pi, np.pi, (16, 2))
    states = integrate_rk4(y0, 1 / 30, 300)
    if arch.startswith("preset:"):
        preset = run_preset(arch.removeprefix("preset:"))
        config, batch_size = preset.model, preset.train.batch_size
        cfg = replace(preset.train, max_windows=steps * batch_size)
    elif arch == "course":
        config = ModelConfig.preset(arch)
        cfg = replace(TrainConfig.preset(arch), max_windows=steps * batch_size)
    else:
        config = ModelConfig.preset(arch)
        cfg = TrainConfig(batch_size=batch_size, max_windows=steps * batch_size, noise=0.1)
    state = fitting.build_state(config, fit_scaler(config, states), cfg, torch.device("cpu"))
    source = fitting.WindowSource(states, config.window + 1, torch.device("cpu"))
    warm = TrainConfig(batch_size=batch_size, max_windows=3 * batch_size)
    fitting.train_epoch(state, source, warm, lambda: False)
    t0, c0 = time.perf_counter(), time.process_time()
    fitting.train_epoch(state, source, cfg, lambda: False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"samples_per_s": steps * batch_size / wall, "wall_s": wall, "cpu_s": cpu}


def measure(arch: str, batch_size: int, n_threads: int, steps: int) -> dict[str, float]:
    """Run :func:`child` in a fresh interpreter with the thread environment."""
    argv = [
        sys.executable,
        __file__,
        "--child",
        arch,
        str(batch_size),
        str(n_threads),
        "--steps",
        str(steps),
    ]
    env = {**os.environ, **thread_env(n_threads)}
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def compare_class(rounds: int, steps: int, preset: str = "class") -> bool:
    """Interleave the course's setup and a run preset; print both and the speed-up.

    Returns whether the median speed-up reaches :data:`GOAL_SPEEDUP`.
    """
    from coursehub.pendulum.config import run_preset

    spec = run_preset(preset)
    variants = {
        "course": ("course", 1, 1, steps * BATCH1_FACTOR),
        preset: (f"preset:{preset}", spec.train.batch_size, spec.n_threads, steps),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            rates[name].append(measure(*variants[name])["samples_per_s"])
    ratios = [c / b for c, b in zip(rates[preset], rates["course"], strict=True)]
    m, t = spec.model, spec.train
    label = f"{preset}: LSTM {m.n_layers} x {m.hidden_size}, batch {t.batch_size}, "
    label += f"{spec.n_threads} threads"
    print(
        f"\nclass comparison, {rounds} interleaved rounds (median samples/s [min, max]):\n"
        f"  {'course: LSTM 1 x 100, batch 1, 1 thread':<45}"
        f"{_median_range(rates['course'], '.0f')}\n"
        f"  {label:<45}"
        f"{_median_range(rates[preset], '.0f')}\n"
        f"  speed-up (per-round ratio): {_median_range(ratios, '.1f')}x, "
        f"goal {GOAL_SPEEDUP:g}x"
    )
    return statistics.median(ratios) >= GOAL_SPEEDUP


def _median_range(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}, {max(values):{fmt}}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="timed optimiser steps")
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds of the class comparison"
    )
    parser.add_argument("--no-grid", action="store_true", help="only the class comparison")
    parser.add_argument("--child", nargs=3, metavar=("ARCH", "BATCH", "THREADS"))
    args = parser.parse_args()
    if args.child:
        arch, batch, threads = args.child
        print(json.dumps(child(arch, int(batch), int(threads), args.steps)))
        return 0
    if not args.no_grid:
        grid(args.steps)
    return 0 if compare_class(args.rounds, args.steps) else 1


def grid(steps: int) -> None:
    """Print the throughput of every configuration of the grid, one run each."""
    print(f"{'arch':<8}{'threads':>8}{'batch':>7}{'samples/s':>12}{'wall s':>9}{'cpu s':>8}")
    configs = [("lstm", b, n) for n in THREADS for b in BATCH_SIZES]
    configs += [("course", 1, n) for n in THREADS]
    for arch, batch, n in configs:
        # batch-1 steps are short: time ten times as many for a steadier figure
        r = measure(arch, batch, n, steps * (BATCH1_FACTOR if batch == 1 else 1))
        print(
            f"{arch:<8}{n:>8}{batch:>7}{r['samples_per_s']:>12.0f}{r['wall_s']:>9.2f}"
            f"{r['cpu_s']:>8.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())
