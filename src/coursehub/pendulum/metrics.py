"""DP-Buffat-v1 and DP-Buffat-v2 forecast metrics, numpy only.

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

DP-Buffat-v2 (:data:`V2`) is v1 with a horizon of ``HORIZON_V2`` samples
(10 s), long enough that the valid prediction time of a good forecaster of
the chaotic regime is measured rather than capped by the horizon: same data,
splits, context, NRMSE, threshold, Lyapunov exponent and groups; NRMSE
reported at one step, 1 s and 5 s; energy drift at 10 s. Its summaries add,
for every median, a 95 % bootstrap interval over test trajectories
(:func:`median_interval`) and the share of starts whose forecast never left
the band (``vpt_capped``). v1 (:data:`V1`) is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from coursehub.errors import UsageError
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
#: DP-Buffat-v2's horizon in samples: 10 s at dt = 1/30 s.
HORIZON_V2 = 300
#: Bootstrap resamples of the test trajectories behind each interval, and its coverage.
N_BOOTSTRAP = 2000
INTERVAL = 0.95


@dataclass(frozen=True)
class Benchmark:
    """One version of the benchmark: context, horizon and the NRMSE it reports.

    Attributes
    ----------
    name : str
        ``"DP-Buffat-v1"`` or ``"DP-Buffat-v2"``.
    version : int
    context : int
        True samples given to the forecaster (10).
    horizon : int
        Samples forecast from each start (100 in v1, 300 in v2).
    nrmse_points : tuple of (str, int)
        Summary key and step (1-based: step ``k`` is ``k * dt`` after the last
        context sample) of each NRMSE reported.
    intervals : bool
        Whether summaries carry bootstrap intervals and ``vpt_capped`` (v2).
    """

    name: str
    version: int
    context: int
    horizon: int
    nrmse_points: tuple[tuple[str, int], ...]
    intervals: bool


#: DP-Buffat-v1: 100 samples (3.33 s) ahead, NRMSE at steps 1, 10, 50 and 100.
V1 = Benchmark(
    "DP-Buffat-v1", 1, CONTEXT, HORIZON, tuple((f"nrmse_{k}", k) for k in NRMSE_STEPS), False
)
#: DP-Buffat-v2: 300 samples (10 s) ahead, NRMSE at one step (1/30 s), 1 s and 5 s.
V2 = Benchmark(
    "DP-Buffat-v2",
    2,
    CONTEXT,
    HORIZON_V2,
    (("nrmse_1", 1), ("nrmse_1s", 30), ("nrmse_5s", 150)),
    True,
)
BENCHMARKS: dict[int, Benchmark] = {1: V1, 2: V2}


def benchmark(version: int) -> Benchmark:
    """The benchmark of ``version`` (1 or 2).

    Raises
    ------
    UsageError
        On another version.
    """
    if version not in BENCHMARKS:
        raise UsageError(f"unknown benchmark version {version}: choose one of {sorted(BENCHMARKS)}")
    return BENCHMARKS[version]


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


def median_interval(
    values: ArrayLike,
    trajectory: ArrayLike,
    n_boot: int = N_BOOTSTRAP,
    level: float = INTERVAL,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median, resampling whole test trajectories.

    The starts of one trajectory are not independent (they share its
    energy and regime), so the resampling unit is the trajectory: each of
    ``n_boot`` resamples draws as many trajectories as there are, with
    replacement, and takes the median of all their starts; the interval is
    the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of those
    medians (the percentile interval of Efron and Tibshirani, *An
    Introduction to the Bootstrap*, Chapman & Hall, 1993, ch. 13; the
    resampling of clusters: Davison and Hinkley, *Bootstrap Methods and
    their Application*, Cambridge University Press, 1997, sec. 3.8). Seeded:
    the same values give the same interval.

    Parameters
    ----------
    values : array_like, shape (n,)
        One figure per start.
    trajectory : array_like, shape (n,)
        The test trajectory of each start.
    n_boot : int
    level : float
        Coverage, in (0, 1).
    seed : int

    Returns
    -------
    (float, float)
        Low and high ends; ``(nan, nan)`` for no values.
    """
    v = np.asarray(values, dtype=np.float64)
    traj = np.asarray(trajectory)
    if v.size == 0:
        return (float("nan"), float("nan"))
    _, inverse = np.unique(traj, return_inverse=True)
    members = [np.flatnonzero(inverse == j) for j in range(int(inverse.max()) + 1)]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(members), size=(n_boot, len(members)))
    sizes = {len(m) for m in members}
    if len(sizes) == 1:  # the usual case: every trajectory has the same starts
        table = v[np.stack(members)]  # (n_traj, starts per trajectory)
        medians = np.median(table[draws].reshape(n_boot, -1), axis=1)
    else:
        medians = np.array([np.median(np.concatenate([v[members[j]] for j in d])) for d in draws])
    low, high = np.quantile(medians, [(1 - level) / 2, (1 + level) / 2])
    return (float(low), float(high))


def summarize(
    scores: dict[str, FloatArray],
    energy_norm: ArrayLike,
    bench: Benchmark = V1,
    trajectory: ArrayLike | None = None,
) -> dict[str, Any]:
    """Median and mean of each figure for every group of starts.

    Parameters
    ----------
    scores : dict
        :func:`score`'s figures, ``nrmse`` of shape (n, horizon).
    energy_norm : array_like, shape (n,)
        Normalised energy of each start's trajectory.
    bench : Benchmark
        Which NRMSE to report; with ``bench.intervals`` (v2) every figure
        also gets ``low`` and ``high`` (:func:`median_interval`) and each
        group a ``vpt_capped`` share.
    trajectory : array_like, shape (n,), optional
        The test trajectory of each start; required for intervals.

    Returns
    -------
    dict
        ``{group: {"n_starts", "nrmse_1", "nrmse_10", "nrmse_50", "nrmse_100",
        "vpt_s", "vpt_lyapunov", "energy_drift"}}`` for v1, each figure a
        ``{"median", "mean"}`` dict (None for an empty group); v2 has
        ``nrmse_1``, ``nrmse_1s``, ``nrmse_5s``, the same VPT and drift
        figures with ``low`` and ``high``, and ``vpt_capped``.

    Raises
    ------
    UsageError
        If ``bench`` has intervals and ``trajectory`` is missing.
    """
    if bench.intervals and trajectory is None:
        raise UsageError(f"{bench.name} summaries need the trajectory of each start")
    traj = None if trajectory is None else np.asarray(trajectory)
    horizon = scores["nrmse"].shape[1]
    out: dict[str, Any] = {}
    for name, mask in group_masks(energy_norm).items():
        curve = scores["nrmse"][mask]
        figures = {key: curve[:, step - 1] for key, step in bench.nrmse_points if step <= horizon}
        figures["vpt_s"] = scores["vpt_s"][mask]
        figures["vpt_lyapunov"] = scores["vpt_s"][mask] * LYAPUNOV_EXPONENT
        figures["energy_drift"] = scores["energy_drift"][mask]
        group: dict[str, Any] = {"n_starts": int(mask.sum())}
        for key, values in figures.items():
            group[key] = _stats(values)
            if bench.intervals and traj is not None:
                low, high = median_interval(values, traj[mask])
                group[key].update(low=None if values.size == 0 else low)
                group[key].update(high=None if values.size == 0 else high)
        if bench.intervals:
            capped = curve.max(axis=1, initial=0.0) <= VPT_THRESHOLD
            group["vpt_capped"] = float(capped.mean()) if capped.size else None
        out[name] = group
    return out


def plan_starts(n_samples: int, per_trajectory: int, horizon: int = HORIZON) -> NDArray[np.int64]:
    """Context start offsets used in every test trajectory, evenly spaced and fixed.

    ``per_trajectory`` offsets from 0 to ``n_samples - CONTEXT - horizon``
    inclusive (rounded), so the forecasts cover the whole trajectory and
    no randomness is involved: every model is scored on the same starts.
    ``horizon``: 100 for v1 (the default), 300 for v2.
    """
    last = n_samples - CONTEXT - horizon
    if last < 0:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.round(np.linspace(0, last, per_trajectory)).astype(np.int64))
