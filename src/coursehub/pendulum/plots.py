"""Figures of an evaluation: example rollouts against the truth, NRMSE against horizon.

matplotlib is imported inside :func:`save_figure` with the Agg backend, so
it works without a display and never loads at ``coursehub --help`` time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from coursehub.atomicfile import atomic_path
from coursehub.pendulum.metrics import CHAOTIC_MIN, REGULAR_MAX, VPT_THRESHOLD
from coursehub.pendulum.physics import PendulumParams

N_EXAMPLES = 3
LABELS = {"model": "LSTM", "persistence": "persistence", "ridge_ar10": "ridge AR(10)"}


def plan_examples(energy_norm: NDArray[Any], n: int = N_EXAMPLES) -> list[int]:
    """Start indices to draw: the first regular, the first chaotic, then others in order."""
    picks: list[int] = []
    for mask in (energy_norm < REGULAR_MAX, energy_norm > CHAOTIC_MIN):
        hits = np.flatnonzero(mask)
        if len(hits):
            picks.append(int(hits[0]))
    rest = [i for i in range(len(energy_norm)) if i not in picks]
    step = max(1, len(rest) // max(1, n))
    return (picks + rest[len(rest) // 2 :: step])[:n]


def bob2_path(states: NDArray[Any], params: PendulumParams) -> tuple[NDArray[Any], NDArray[Any]]:
    """Cartesian position (x, y) in m of the second mass, pivot at the origin, y up."""
    th1, th2 = states[..., 0], states[..., 2]
    x = params.l1 * np.sin(th1) + params.l2 * np.sin(th2)
    y = -params.l1 * np.cos(th1) - params.l2 * np.cos(th2)
    return x, y


def save_figure(result: dict[str, Any], dt: float, params: PendulumParams, path: Path) -> None:
    """Draw the figure of :func:`coursehub.pendulum.evaluate.evaluate_model`'s result.

    Top row: angles of the model's rollout and the truth for a few starts;
    middle row: the second mass's x-y path; bottom: median NRMSE against
    horizon for every forecaster. Written atomically to ``path`` (PNG).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts, truth = result["starts"], result["starts"]["truth"]
    picks = plan_examples(starts["energy_norm"])
    fig = plt.figure(figsize=(4.2 * max(1, len(picks)), 10), layout="constrained")
    grid = fig.add_gridspec(3, max(1, len(picks)))
    t = np.arange(1, truth.shape[1] + 1) * dt
    for col, i in enumerate(picks):
        pred = result["rollouts"]["model"][i]
        ax = fig.add_subplot(grid[0, col])
        for k, name in ((0, "theta1"), (2, "theta2")):
            ax.plot(t, truth[i, :, k], label=f"{name} true")
            ax.plot(t, pred[:, k], "--", label=f"{name} LSTM")
        ax.set(
            title=f"start {i} (E_norm {starts['energy_norm'][i]:.2f})",
            xlabel="t (s)",
            ylabel="angle (rad)",
        )
        ax.legend(fontsize="small")
        ax = fig.add_subplot(grid[1, col])
        ax.plot(*bob2_path(truth[i], params), label="true")
        ax.plot(*bob2_path(pred, params), "--", label="LSTM")
        ax.set(xlabel="x2 (m)", ylabel="y2 (m)", aspect="equal")
        ax.legend(fontsize="small")
    ax = fig.add_subplot(grid[2, :])
    for name, scores in result["scores"].items():
        ax.plot(t, np.median(scores["nrmse"], axis=0), label=LABELS.get(name, name))
    ax.axhline(VPT_THRESHOLD, color="grey", linestyle=":", label="VPT threshold")
    ax.set(xlabel="horizon (s)", ylabel="median NRMSE", yscale="log")
    ax.legend()
    try:
        with atomic_path(path, mode=None) as tmp:
            fig.savefig(tmp, format="png", dpi=90)
    finally:
        plt.close(fig)
