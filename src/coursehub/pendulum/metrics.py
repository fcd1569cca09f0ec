"""DP-Buffat-v1 forecast metrics, numpy only.

DP-Buffat-v1 is this project's own benchmark (named after the course it
comes from), defined here: the data are those of
:mod:`coursehub.pendulum.dataset` (1,000 trajectories of the course's double
pendulum, :class:`coursehub.pendulum.physics.PendulumParams`, released at
rest, seed 0, split 800/100/100 by trajectory), the task and the metrics
below; ``benchmarks/bench_quality.py`` runs it in full. The metrics follow
the usual ones for forecasting chaotic systems (normalised error, valid
prediction time in Lyapunov times: e.g. Pathak et al., "Model-free
prediction of large spatiotemporally chaotic systems from data", Phys. Rev.
Lett. 120, 024102, 2018).

A forecast starts from ``CONTEXT`` true samples and runs ``HORIZON``
samples (3.33 s at dt = 1/30 s) feeding its predictions back.

- ``NRMSE(t) = sqrt(mean_k (yhat_k(t) - y_k(t))^2 / sigma_k^2)`` over the
  four state components, angle differences wrapped with ``atan2(sin, cos)``,
  ``sigma_k`` the standard deviation of component ``k`` on the training
  split (angles wrapped first).
- Valid prediction time (VPT): the first time ``t = step * dt`` at which
  ``NRMSE > 0.5``; a forecast that never leaves the band gets the whole
  horizon. Also given in Lyapunov times, ``VPT * LYAPUNOV_EXPONENT``.
- Energy drift: ``|E(yhat) - E(y)| / (e_top - e_min)`` at the last step.

Each is summarised (median and mean) over all starts, regular starts
(normalised energy < 0.25) and chaotic starts (> 0.45).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from coursehub.pendulum.physics import PendulumParams, energy

FloatArray = NDArray[np.float64]
CONTEXT = 10
HORIZON = 100
NRMSE_STEPS = (1, 10, 50, 100)
VPT_THRESHOLD = 0.5
#: Largest Lyapunov exponent used for the chaotic regime, 1/s: a fixed convention of
#: DP-Buffat-v1, within the 0.63-0.95 1/s estimated for these parameters at release
#: angles of 75 degrees and more (about 0 at 60 degrees and less).
LYAPUNOV_EXPONENT = 0.85
REGULAR_MAX = 0.25
CHAOTIC_MIN = 0.45


def wrap_angle(x: ArrayLike) -> FloatArray:
    """Angles mapped to (-pi, pi] by ``atan2(sin x, cos x)``."""
    a = np.asarray(x, dtype=np.float64)
    return np.asarray(np.arctan2(np.sin(a), np.cos(a)))


def state_error(predicted: ArrayLike, true: ArrayLike) -> FloatArray:
    """``predicted - true`` (..., 4) with the angle components wrapped."""
    diff = np.asarray(predicted, dtype=np.float64) - np.asarray(true, dtype=np.float64)
    diff[..., 0::2] = wrap_angle(diff[..., 0::2])
    return diff


def state_sigma(states: ArrayLike) -> FloatArray:
    """Standard deviation (4,) of each state component, angles wrapped first.

    Parameters
    ----------
    states : array_like, shape (..., 4)
        The training split's states.
    """
    s = np.array(states, dtype=np.float64).reshape(-1, 4)
    s[:, 0::2] = wrap_angle(s[:, 0::2])
    return np.asarray(s.std(axis=0))


def nrmse_curve(predicted: ArrayLike, true: ArrayLike, sigma: ArrayLike) -> FloatArray:
    """NRMSE of each start at each step.

    Parameters
    ----------
    predicted, true : array_like, shape (n, horizon, 4)
    sigma : array_like, shape (4,)

    Returns
    -------
    ndarray, shape (n, horizon)
    """
    z = state_error(predicted, true) / np.asarray(sigma, dtype=np.float64)
    return np.asarray(np.sqrt(np.mean(z**2, axis=-1)))


def valid_prediction_time(nrmse: ArrayLike, dt: float) -> FloatArray:
    """VPT in s (n,): first ``step * dt`` with NRMSE above the threshold, else ``horizon * dt``.

    Parameters
    ----------
    nrmse : array_like, shape (n, horizon)
        Column ``j`` is step ``j + 1``.
    dt : float
        Sample interval in s.
    """
    curve = np.asarray(nrmse, dtype=np.float64)
    above = curve > VPT_THRESHOLD
    first = np.where(above.any(axis=1), above.argmax(axis=1) + 1, curve.shape[1])
    return np.asarray(first * dt, dtype=np.float64)


def energy_drift(predicted: ArrayLike, true: ArrayLike, params: PendulumParams) -> FloatArray:
    """``|E(predicted) - E(true)| / (e_top - e_min)`` at the last step, shape (n,)."""
    last_p, last_t = np.asarray(predicted)[:, -1], np.asarray(true)[:, -1]
    de = np.abs(energy(last_p, params) - energy(last_t, params))
    return np.asarray(de / (params.e_top - params.e_min))


def score(
    predicted: ArrayLike, true: ArrayLike, sigma: ArrayLike, dt: float, params: PendulumParams
) -> dict[str, FloatArray]:
    """Per-start figures: ``nrmse`` (n, horizon), ``vpt_s`` (n,), ``energy_drift`` (n,)."""
    curve = nrmse_curve(predicted, true, sigma)
    return {
        "nrmse": curve,
        "vpt_s": valid_prediction_time(curve, dt),
        "energy_drift": energy_drift(predicted, true, params),
    }


def group_masks(energy_norm: ArrayLike) -> dict[str, NDArray[np.bool_]]:
    """``all``, ``regular`` (E_norm < 0.25) and ``chaotic`` (E_norm > 0.45) masks per start."""
    e = np.asarray(energy_norm, dtype=np.float64)
    return {"all": np.ones(e.shape, bool), "regular": e < REGULAR_MAX, "chaotic": e > CHAOTIC_MIN}


def _stats(values: FloatArray) -> dict[str, float | None]:
    if values.size == 0:
        return {"median": None, "mean": None}
    return {"median": float(np.median(values)), "mean": float(np.mean(values))}


def summarize(scores: dict[str, FloatArray], energy_norm: ArrayLike) -> dict[str, Any]:
    """Median and mean of each figure for every group of starts.

    Returns
    -------
    dict
        ``{group: {"n_starts", "nrmse_1", "nrmse_10", "nrmse_50", "nrmse_100",
        "vpt_s", "vpt_lyapunov", "energy_drift"}}``, each figure a
        ``{"median", "mean"}`` dict (None for an empty group).
    """
    out: dict[str, Any] = {}
    for name, mask in group_masks(energy_norm).items():
        curve = scores["nrmse"][mask]
        group: dict[str, Any] = {"n_starts": int(mask.sum())}
        for step in NRMSE_STEPS:
            if step <= scores["nrmse"].shape[1]:
                group[f"nrmse_{step}"] = _stats(curve[:, step - 1])
        group["vpt_s"] = _stats(scores["vpt_s"][mask])
        group["vpt_lyapunov"] = _stats(scores["vpt_s"][mask] * LYAPUNOV_EXPONENT)
        group["energy_drift"] = _stats(scores["energy_drift"][mask])
        out[name] = group
    return out


def plan_starts(n_samples: int, per_trajectory: int) -> NDArray[np.int64]:
    """Context start offsets used in every test trajectory, evenly spaced and fixed.

    ``per_trajectory`` offsets from 0 to ``n_samples - CONTEXT - HORIZON``
    inclusive (rounded), so the forecasts cover the whole trajectory and
    no randomness is involved: every model is scored on the same starts.
    """
    last = n_samples - CONTEXT - HORIZON
    if last < 0:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.round(np.linspace(0, last, per_trajectory)).astype(np.int64))
