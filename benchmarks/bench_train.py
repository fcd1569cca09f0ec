"""Training throughput (windows per second) by thread count, batch size and architecture.

    .venv/bin/python benchmarks/bench_train.py [--steps 40]

Each configuration runs in a fresh interpreter whose thread variables and
``torch.set_num_threads`` are set before torch loads, on the same synthetic
trajectories, for a fixed number of optimiser steps after a short warm-up.
Configurations: the default LSTM at 1 and 2 threads x batch sizes 1, 64 and
256 (ten times as many steps at batch size 1), and the course's model
(LSTM(4 -> 100) on raw states, batch size 1) at each thread count. Timings
on a shared machine are rough.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from coursehub.resources.threads import thread_env

THREADS = (1, 2)
BATCH_SIZES = (1, 64, 256)


def child(arch: str, batch_size: int, n_threads: int, steps: int) -> dict[str, float]:
    """Time ``steps`` optimiser steps in this (fresh) process; return the figures."""
    from coursehub.pendulum.train import apply_threads

    apply_threads(n_threads)
    import numpy as np
    import torch

    from coursehub.pendulum import fitting
    from coursehub.pendulum.config import ModelConfig, TrainConfig
    from coursehub.pendulum.model import fit_scaler
    from coursehub.pendulum.physics import integrate_rk4

    rng = np.random.default_rng(0)
    y0 = np.zeros((16, 4))
    y0[:, [0, 2]] = rng.uniform(-np.pi, np.pi, (16, 2))
    states = integrate_rk4(y0, 1 / 30, 300)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="timed optimiser steps")
    parser.add_argument("--child", nargs=3, metavar=("ARCH", "BATCH", "THREADS"))
    args = parser.parse_args()
    if args.child:
        arch, batch, threads = args.child
        print(json.dumps(child(arch, int(batch), int(threads), args.steps)))
        return 0
    print(f"{'arch':<8}{'threads':>8}{'batch':>7}{'samples/s':>12}{'wall s':>9}{'cpu s':>8}")
    configs = [("lstm", b, n) for n in THREADS for b in BATCH_SIZES]
    configs += [("course", 1, n) for n in THREADS]
    for arch, batch, n in configs:
        # batch-1 steps are short: time ten times as many for a steadier figure
        r = measure(arch, batch, n, args.steps * (10 if batch == 1 else 1))
        print(
            f"{arch:<8}{n:>8}{batch:>7}{r['samples_per_s']:>12.0f}{r['wall_s']:>9.2f}"
            f"{r['cpu_s']:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
