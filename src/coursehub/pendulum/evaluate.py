"""Score a forecaster on DP-Buffat-v1 or v2 beside the persistence and ridge AR(10) baselines.

``coursehub pendulum evaluate MODEL_FILE --data FILE [--version 2] --json METRICS --plot PNG``

``--version`` picks the benchmark (:mod:`coursehub.pendulum.metrics`): 1
(the default; 100 samples, 3.33 s ahead) or 2 (300 samples, 10 s ahead,
medians with bootstrap intervals over test trajectories). Starts: in each
valid test trajectory, ``--starts-per-trajectory`` context windows evenly
spaced from the first sample to the last one that leaves room for the
horizon (:func:`coursehub.pendulum.metrics.plan_starts`);
fixed, so every forecaster and every run sees the same starts. Each start
is classed regular or chaotic by its trajectory's normalised energy. The
baselines and ``sigma`` are fitted on the training split of the same file.
Torch, scipy and matplotlib are imported inside functions only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.pendulum import metrics
from coursehub.pendulum.datafile import PendulumDataset, load_dataset
from coursehub.pendulum.dataset import DEFAULT_DATA_PATH

DEFAULT_STARTS = 5
FORECASTERS = ("model", "persistence", "ridge_ar10")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``coursehub pendulum evaluate``."""
    parser.add_argument("model_file", type=Path, metavar="MODEL_FILE", help="checkpoint")
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA_PATH,
        metavar="FILE",
        help=f"dataset file (default: {DEFAULT_DATA_PATH})",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="METRICS",
        help="write every figure to this JSON file",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="PNG",
        help="write rollouts and NRMSE curves to this image",
    )
    parser.add_argument(
        "--arch",
        choices=("lstm", "course"),
        default=None,
        help="refuse a checkpoint of another architecture",
    )
    parser.add_argument(
        "--starts-per-trajectory",
        type=int,
        default=DEFAULT_STARTS,
        metavar="N",
        help=f"forecast starts per test trajectory ({DEFAULT_STARTS})",
    )
    parser.add_argument(
        "--version",
        type=int,
        choices=sorted(metrics.BENCHMARKS),
        default=1,
        help="benchmark: 1 = DP-Buffat-v1, 3.33 s ahead (default); 2 = DP-Buffat-v2, 10 s ahead",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")


def collect_starts(
    ds: PendulumDataset, per_trajectory: int, bench: metrics.Benchmark = metrics.V1
) -> dict[str, NDArray[Any]]:
    """Contexts (n, 10, 4), truths (n, horizon, 4), ``energy_norm`` (n,), ``trajectory`` (n,).

    ``horizon`` is ``bench.horizon`` (100 for v1, 300 for v2); the starts are
    trajectory-major.

    Raises
    ------
    UsageError
        If the test split is empty or its trajectories are shorter than
        ``context + horizon`` samples (110 for v1, 310 for v2).
    """
    test = ds.indices("test")
    offsets = metrics.plan_starts(ds.states.shape[1], per_trajectory, bench.horizon)
    if len(test) == 0 or len(offsets) == 0:
        raise UsageError(
            f"no forecast starts: need test trajectories of at least "
            f"{bench.context + bench.horizon} samples (the dataset has {len(test)} test "
            f"trajectories of {ds.states.shape[1]} samples)"
        )
    traj = np.repeat(test, len(offsets))
    start = np.tile(offsets, len(test))
    span = np.arange(bench.context + bench.horizon)
    windows = ds.states[traj[:, None], start[:, None] + span]
    return {
        "context": windows[:, : bench.context],
        "truth": windows[:, bench.context :],
        "energy_norm": ds.energy_norm[traj],
        "trajectory": traj,
    }


def forecast_all(
    model: Any, ds: PendulumDataset, context: NDArray[Any], horizon: int = metrics.HORIZON
) -> dict[str, Any]:
    """Rollouts (n, horizon, 4) of the model and both baselines from the same contexts.

    Raises
    ------
    UsageError
        If the model needs more context samples than the benchmark gives.
    """
    from coursehub.pendulum.baselines import fit_ridge, persistence_rollout
    from coursehub.pendulum.model import rollout

    ridge = fit_ridge(ds.states[ds.indices("train")], window=metrics.CONTEXT)
    window = model.config.window
    if window > context.shape[1]:
        raise UsageError(
            f"the model needs {window} context samples; the benchmark gives {context.shape[1]}"
        )
    return {
        "model": rollout(model, context[:, -window:], horizon),
        "persistence": persistence_rollout(context, horizon),
        "ridge_ar10": ridge.rollout(context, horizon),
    }


def evaluate_model(
    model: Any, ds: PendulumDataset, per_trajectory: int, version: int = 1
) -> dict[str, Any]:
    """Forecast every start with every forecaster and score them.

    Parameters
    ----------
    model : Forecaster
    ds : PendulumDataset
    per_trajectory : int
        Starts per test trajectory.
    version : int
        Benchmark version, 1 (the default) or 2 (:data:`coursehub.pendulum.metrics.BENCHMARKS`).

    Returns
    -------
    dict
        ``benchmark`` (:class:`~coursehub.pendulum.metrics.Benchmark`),
        ``starts`` (:func:`collect_starts`), ``rollouts`` and per-start
        ``scores`` by forecaster, ``summary`` by forecaster and group, ``sigma``.

    Raises
    ------
    UsageError
        On an unknown version or a dataset too short for its horizon.
    """
    bench = metrics.benchmark(version)
    starts = collect_starts(ds, per_trajectory, bench)
    sigma = metrics.state_sigma(ds.states[ds.indices("train")])
    rollouts = forecast_all(model, ds, starts["context"], bench.horizon)
    scores = {
        name: metrics.score(pred, starts["truth"], sigma, ds.dt, ds.params)
        for name, pred in rollouts.items()
    }
    summary = {
        name: metrics.summarize(
            s, starts["energy_norm"], bench, starts["trajectory"] if bench.intervals else None
        )
        for name, s in scores.items()
    }
    return {
        "benchmark": bench,
        "starts": starts,
        "rollouts": rollouts,
        "scores": scores,
        "summary": summary,
        "sigma": sigma,
    }


def render_report(result: dict[str, Any], checkpoint: dict[str, Any], args: Any) -> dict[str, Any]:
    """The JSON document: settings, model description, summaries and median NRMSE curves."""
    starts = result["starts"]
    bench = result.get("benchmark", metrics.V1)
    return {
        "benchmark": bench.name,
        "model_file": str(args.model_file),
        "data": str(args.data),
        "context": bench.context,
        "horizon": bench.horizon,
        "starts_per_trajectory": args.starts_per_trajectory,
        "n_test_trajectories": len(np.unique(starts["trajectory"])),
        "lyapunov_exponent_per_s": metrics.LYAPUNOV_EXPONENT,
        "sigma": [float(v) for v in result["sigma"]],
        "model": {
            "config": checkpoint["model_config"],
            "epoch": checkpoint["epoch"],
            "train_config": checkpoint["train_config"],
            "val_loss": checkpoint["history"].get("val_loss", []),
        },
        "metrics": result["summary"],
        "nrmse_median_curve": {
            name: [float(v) for v in np.median(s["nrmse"], axis=0)]
            for name, s in result["scores"].items()
        },
    }


def render_table(summary: dict[str, Any]) -> str:
    """Plain-text table: one row per figure and group, one column per forecaster (medians).

    A v2 summary (its figures carry ``low`` and ``high``) is rendered by
    :func:`render_interval_table`.
    """
    if "low" in summary["model"]["all"]["vpt_s"]:
        return render_interval_table(summary)
    lines = [f"{'figure':<26}" + "".join(f"{name:>14}" for name in FORECASTERS)]
    for group, figures in summary["model"].items():
        for key in figures:
            if key == "n_starts":
                continue
            cells = []
            for name in FORECASTERS:
                value = summary[name][group][key]["median"]
                cells.append(f"{'-' if value is None else f'{value:.4g}':>14}")
            lines.append(f"{group + ' ' + key:<26}" + "".join(cells))
    counts = ", ".join(f"{g} {f['n_starts']}" for g, f in summary["model"].items())
    return "\n".join([*lines, f"(medians; starts: {counts})"])


def render_interval_table(summary: dict[str, Any]) -> str:
    """Plain-text table of a v2 summary: ``median [low, high]`` per forecaster.

    One row per figure and group (``all``, ``regular``, ``chaotic``), one
    column per forecaster; the interval is the 95 % bootstrap interval of
    the median over test trajectories
    (:func:`coursehub.pendulum.metrics.median_interval`). A last row per
    group gives the share of starts still within the band at 10 s
    (``vpt_capped``).
    """
    width = 31
    lines = [f"{'figure':<20}" + "".join(f"{name:>{width}}" for name in FORECASTERS)]
    for group, figures in summary["model"].items():
        for key in figures:
            if key == "n_starts":
                continue
            row = []
            for name in FORECASTERS:
                value = summary[name][group][key]
                row.append(f"{_cell(value):>{width}}")
            lines.append(f"{group + ' ' + key:<20}" + "".join(row))
    counts = ", ".join(f"{g} {f['n_starts']}" for g, f in summary["model"].items())
    return "\n".join(
        [*lines, f"(medians [95% bootstrap interval over test trajectories]; starts: {counts})"]
    )


def _cell(value: Any) -> str:
    """``median [low, high]`` of a figure, a share as is, ``-`` for an empty group."""
    if value is None:
        return "-"
    if not isinstance(value, dict):
        return f"{value:.3g}"
    if value["median"] is None:
        return "-"
    return f"{value['median']:.3g} [{value['low']:.3g}, {value['high']:.3g}]"


def write_json(document: dict[str, Any], path: Path) -> None:
    """Write ``document`` as JSON atomically (:func:`coursehub.atomicfile.write_atomically`)."""
    write_atomically(path, json.dumps(document, indent=1), mode=None)


def run(args: argparse.Namespace) -> int:
    """Check the input, load model and data, score, print the table, write JSON and plot."""
    if args.starts_per_trajectory < 1:
        raise UsageError(f"--starts-per-trajectory={args.starts_per_trajectory} must be >= 1")
    if args.threads < 1:
        raise UsageError(f"--threads={args.threads} must be >= 1")
    ds = load_dataset(args.data)
    from coursehub.pendulum.train import apply_threads, pick_device

    apply_threads(args.threads)
    from coursehub.pendulum.checkpoint import load_checkpoint, restore_state

    checkpoint = load_checkpoint(args.model_file, expect_arch=args.arch)
    model = restore_state(checkpoint, pick_device(args.device)).model.eval()
    result = evaluate_model(model, ds, args.starts_per_trajectory, getattr(args, "version", 1))
    print(render_table(result["summary"]))
    if args.json is not None:
        write_json(render_report(result, checkpoint, args), args.json)
        print(f"metrics: {args.json}")
    if args.plot is not None:
        from coursehub.pendulum.plots import save_figure

        if getattr(args, "version", 1) == 1:
            save_figure(result, ds.dt, ds.params, args.plot)
        else:
            from coursehub.pendulum.plots import save_forecast_figure

            save_forecast_figure(result, ds.dt, args.plot)
        print(f"plot: {args.plot}")
    return 0
