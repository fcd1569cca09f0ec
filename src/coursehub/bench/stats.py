"""Statistics of repeated, interleaved runs: paired slowdowns, a bootstrap interval, noise checks.

A shared machine drifts: the same job alone took 4.8 s in one run and 7.0 s
in the next. The benchmark therefore runs each scenario right after a run of
one student alone (``alone, pair, alone, pair, ...``) and measures each
repeat against *its own* alone run: slowdown ``i`` = ``pair_s[i] /
alone_s[i]``. A slow drift touches both runs of a pair alike and cancels out.

Over the repeats it reports the median slowdown with a percentile bootstrap
interval of that median (Efron & Tibshirani, *An Introduction to the
Bootstrap*, 1993, ch. 13; resampling the repeats with replacement, numpy's
seeded ``default_rng``: the same inputs and seed give the same interval),
the spread of the alone runs, and warnings when the figures cannot support
a conclusion: fewer than two repeats, an interval that straddles the target,
or alone runs that differ by more than :data:`MAX_BASELINE_SPREAD` of their
median. Pure functions only: nothing here runs or times anything.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Largest (max - min) / median of the alone runs for a run to count as quiet:
#: the benchmark's threshold ("baseline spread > 20 %" is too noisy to conclude).
MAX_BASELINE_SPREAD = 0.20
#: Bootstrap resamples (enough for stable 2.5 / 97.5 percentiles).
N_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0
#: How a warning about the spread of the alone runs begins (the report prints it once).
SPREAD_WARNING = "the alone runs differ by"


@dataclass(frozen=True)
class Spread:
    """How much runs of the same thing differ (seconds, or any unit).

    Attributes
    ----------
    n
        Number of runs.
    min, q1, median, q3, max
        Order statistics (``q1``/``q3``: quartiles, ``statistics.quantiles``
        inclusive method).
    """

    n: int
    min: float
    q1: float
    median: float
    q3: float
    max: float

    @property
    def relative(self) -> float:
        """``(max - min) / median``: 0.2 means the runs differ by 20 % of their median."""
        return (self.max - self.min) / self.median if self.median else math.inf


@dataclass(frozen=True)
class Summary:
    """Paired ratios of repeated runs and what they allow to conclude.

    Attributes
    ----------
    ratios
        One ratio per repeat, ``pair_s[i] / alone_s[i]``, in run order.
    median
        Median of ``ratios``.
    low, high
        Bootstrap interval of the median (equal to ``median`` with one repeat).
    confidence
        Level of the interval (0.95).
    baseline
        Spread of the alone runs.
    target
        The bound the ratio is held to, or None.
    at_most
        True: the target is met when ``median <= target``; False: ``>=``.
    warnings
        Why the figures cannot support a conclusion (empty when they can).
    """

    ratios: tuple[float, ...]
    median: float
    low: float
    high: float
    confidence: float
    baseline: Spread
    target: float | None = None
    at_most: bool = True
    warnings: tuple[str, ...] = ()

    @property
    def met(self) -> bool | None:
        """Whether the median meets the target (None without a target)."""
        if self.target is None:
            return None
        return self.median <= self.target if self.at_most else self.median >= self.target

    @property
    def conclusive(self) -> bool:
        """True when no warning was raised."""
        return not self.warnings


def describe_spread(values: Sequence[float]) -> Spread:
    """Return the order statistics of ``values`` (one or more numbers).

    Raises
    ------
    ValueError
        If ``values`` is empty.
    """
    if not values:
        raise ValueError("no runs to describe")
    ordered = sorted(float(v) for v in values)
    if len(ordered) == 1:
        q1 = q3 = ordered[0]
    else:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return Spread(len(ordered), ordered[0], q1, statistics.median(ordered), q3, ordered[-1])


def check_spread(spread: Spread, max_spread: float = MAX_BASELINE_SPREAD) -> str | None:
    """Return a warning when the alone runs differ by more than ``max_spread`` of their median."""
    if spread.relative <= max_spread:
        return None
    return (
        f"{SPREAD_WARNING} {spread.relative:.0%} of their median (over "
        f"{max_spread:.0%}: min {spread.min:.2f}, median {spread.median:.2f}, max "
        f"{spread.max:.2f} s): the machine was too noisy to conclude"
    )


def bootstrap_median_interval(
    values: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Return the percentile bootstrap interval of the median of ``values``.

    ``n_resamples`` samples of ``len(values)`` values drawn with replacement
    (``numpy.random.default_rng(seed)``); the interval runs from the
    ``(1 - confidence) / 2`` to the ``(1 + confidence) / 2`` quantile of their
    medians. Deterministic for a given seed.

    Raises
    ------
    ValueError
        If ``values`` is empty or ``confidence`` is not in (0, 1).
    """
    import numpy as np

    if not values:
        raise ValueError("no values to bootstrap")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    data = np.asarray(values, dtype=float)
    if len(data) == 1:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    medians = np.median(data[rng.integers(0, len(data), (n_resamples, len(data)))], axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(medians, [tail, 1.0 - tail])
    return float(low), float(high)


def describe_median(name: str, values: Sequence[float], unit: str = "") -> str:
    """Return one line: ``name: median M<unit>, 95 % interval [L, H] (n=N)`` (pure).

    ``[L, H]``: :func:`bootstrap_median_interval` of ``values``; three
    significant digits. One value has no interval: the line says so
    (``no interval (n=1: repeat at least twice)``) rather than print a
    zero-width one.

    Raises
    ------
    ValueError
        If ``values`` is empty.
    """
    if len(values) == 1:
        return f"{name}: {values[0]:.3g}{unit}, no interval (n=1: repeat at least twice)"
    low, high = bootstrap_median_interval(values)
    return (
        f"{name}: median {statistics.median(values):.3g}{unit}, "
        f"95 % interval [{low:.3g}, {high:.3g}] (n={len(values)})"
    )


def summarise_slowdowns(
    alone_s: Sequence[float],
    pair_s: Sequence[float],
    target: float | None = None,
    at_most: bool = True,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    max_spread: float = MAX_BASELINE_SPREAD,
    n_resamples: int = N_RESAMPLES,
) -> Summary:
    """Summarise repeated runs, each measured against the alone run just before it.

    Parameters
    ----------
    alone_s
        Seconds of each alone run (one student), in run order.
    pair_s
        Seconds of the scenario's run that followed each of them (the median
        student of that run); same length as ``alone_s``.
    target, at_most
        The bound on the ratio and its direction (``<=`` when ``at_most``),
        or None: no target.
    confidence, seed, n_resamples
        Of the bootstrap interval (:func:`bootstrap_median_interval`).
    max_spread
        Largest ``(max - min) / median`` of the alone runs before a warning.

    Returns
    -------
    Summary
        Ratios, median, interval, spread of the alone runs and warnings.

    Raises
    ------
    ValueError
        If the sequences are empty, of different lengths, or hold a time <= 0.
    """
    if not alone_s or len(alone_s) != len(pair_s):
        raise ValueError(
            f"need as many alone runs as paired runs, got {len(alone_s)} and {len(pair_s)}"
        )
    if min(*alone_s, *pair_s) <= 0:
        raise ValueError("run times must be > 0")
    ratios = tuple(p / a for a, p in zip(alone_s, pair_s, strict=True))
    median = statistics.median(ratios)
    low, high = bootstrap_median_interval(ratios, confidence, n_resamples, seed)
    baseline = describe_spread(alone_s)
    warnings = []
    if len(ratios) < 2:
        warnings.append("one repeat only: no interval (use --repeat 5 or more)")
    elif target is not None and low <= target <= high:
        warnings.append(
            f"the {confidence:.0%} interval {low:.2f}-{high:.2f} straddles the target "
            f"{target:.2f}: too noisy to conclude"
        )
    noisy = check_spread(baseline, max_spread)
    warnings += [noisy] if noisy else []
    return Summary(
        ratios, median, low, high, confidence, baseline, target, at_most, tuple(warnings)
    )
