"""Figures of an evaluation: example rollouts against the truth, NRMSE against horizon.

:func:`save_figure` draws DP-Buffat-v1's figure; :func:`save_forecast_figure`
draws DP-Buffat-v2's: 10-s forecasts against the truth and the error growth
against Lyapunov time. matplotlib is imported inside them with the Agg
backend, so they work without a display and never load at ``coursehub
--help`` time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from coursehub.atomicfile import atomic_path
from coursehub.pendulum.metrics import (
    CHAOTIC_MIN,
    LYAPUNOV_EXPONENT,
    REGULAR_MAX,
    VPT_THRESHOLD,
    group_masks,
)
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


def save_forecast_figure(result: dict[str, Any], dt: float, path: Path) -> None:
    """Draw a DP-Buffat-v2 result: 10-s forecasts and error growth in Lyapunov times.

    Top row, for a typical regular and a typical chaotic start
    (:func:`plan_typical`): both angles, wrapped to (-pi, pi], true and
    forecast by the LSTM over the whole horizon, with the LSTM's valid
    prediction time marked. Bottom
    left: median NRMSE of the chaotic starts against ``t * lambda`` (Lyapunov
    times, ``lambda`` = :data:`~coursehub.pendulum.metrics.LYAPUNOV_EXPONENT`)
    for every forecaster, the LSTM's interquartile band shaded, and the
    growth ``exp(lambda t)`` that an error of the first step follows in a
    system with that largest Lyapunov exponent (Strogatz, *Nonlinear
    Dynamics and Chaos*, 2nd ed., Westview, 2015, sec. 9.3); the same for
    the regular starts at the right. Written atomically to ``path`` (PNG).

    Parameters
    ----------
    result : dict
        :func:`coursehub.pendulum.evaluate.evaluate_model`'s result with
        ``version=2`` (any horizon works).
    dt : float
        Sample interval, s.
    path : Path
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts, truth = result["starts"], result["starts"]["truth"]
    lstm = result["scores"]["model"]
    picks = plan_typical(starts["energy_norm"], lstm["vpt_s"])
    t = np.arange(1, truth.shape[1] + 1) * dt
    fig = plt.figure(figsize=(12, 8), layout="constrained")
    grid = fig.add_gridspec(2, 2)
    for col, i in enumerate(picks):
        pred = result["rollouts"]["model"][i]
        ax = fig.add_subplot(grid[0, col])
        for k, name in ((0, "theta1"), (2, "theta2")):
            (line,) = ax.plot(t, _wrap(truth[i, :, k]), label=f"{name} true")
            ax.plot(t, _wrap(pred[:, k]), "--", color=line.get_color(), label=f"{name} LSTM")
        ax.axvline(lstm["vpt_s"][i], color="grey", linestyle=":", label="LSTM VPT")
        regime = "chaotic" if starts["energy_norm"][i] > CHAOTIC_MIN else "regular"
        ax.set(
            title=f"{regime} start {i} (E_norm {starts['energy_norm'][i]:.2f})",
            xlabel="t (s)",
            ylabel="angle (rad)",
        )
        ax.legend(fontsize="small", loc="lower left")
    masks = group_masks(starts["energy_norm"])
    for col, group in enumerate(("chaotic", "regular")):
        ax = fig.add_subplot(grid[1, col])
        mask = masks[group]
        if not mask.any():
            ax.set(title=f"{group}: no starts")
            continue
        lyap = t * LYAPUNOV_EXPONENT
        for name, scores in result["scores"].items():
            ax.plot(lyap, np.median(scores["nrmse"][mask], axis=0), label=LABELS.get(name, name))
        low, high = np.quantile(lstm["nrmse"][mask], [0.25, 0.75], axis=0)
        ax.fill_between(lyap, low, high, alpha=0.2, label="LSTM quartiles")
        first = float(np.median(lstm["nrmse"][mask][:, 0]))
        ax.plot(lyap, first * np.exp(lyap - lyap[0]), "k--", lw=0.8, label="exp(lambda t)")
        ax.axhline(VPT_THRESHOLD, color="grey", linestyle=":", label="VPT threshold")
        ax.set(
            title=f"{group} starts ({int(mask.sum())}): error growth",
            xlabel=f"Lyapunov times (t x {LYAPUNOV_EXPONENT} 1/s)",
            ylabel="median NRMSE",
            yscale="log",
            ylim=(max(1e-4, 0.5 * first), 10),
        )
        ax.legend(fontsize="small")
    try:
        with atomic_path(path, mode=None) as tmp:
            fig.savefig(tmp, format="png", dpi=90)
    finally:
        plt.close(fig)


def plan_typical(energy_norm: NDArray[Any], vpt_s: NDArray[Any]) -> list[int]:
    """A regular and a chaotic start whose VPT is closest to their group's median.

    Parameters
    ----------
    energy_norm, vpt_s : ndarray, shape (n,)
        Normalised energy and the forecaster's valid prediction time (s) of each start.

    Returns
    -------
    list of int
        At most two start indices, regular first; the first such start on ties,
        none for an empty group.
    """
    picks = []
    for group in ("regular", "chaotic"):
        hits = np.flatnonzero(group_masks(energy_norm)[group])
        if len(hits):
            gap = np.abs(vpt_s[hits] - np.median(vpt_s[hits]))
            picks.append(int(hits[np.argmin(gap)]))
    return picks


def _wrap(angle: NDArray[Any]) -> NDArray[Any]:
    """Angles to (-pi, pi], with NaN where the wrapped curve jumps (no vertical lines)."""
    wrapped = np.arctan2(np.sin(angle), np.cos(angle))
    jumps = np.abs(np.diff(wrapped, prepend=wrapped[:1])) > np.pi
    return np.where(jumps, np.nan, wrapped)
