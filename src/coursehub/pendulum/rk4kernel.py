"""Compiled classical RK4 for the double pendulum (numba), one trajectory at a time.

The same method, steps and equations as the numpy path of
:func:`coursehub.pendulum.physics.integrate_rk4` (module docstring there),
compiled with numba (https://numba.readthedocs.io) so that a trajectory's
state stays in registers for all its sub-steps. Two changes of formulation
keep the transcendental cost low at full float64 accuracy:

* per stage only ``sin``/``cos`` of ``theta1`` and ``theta2`` are evaluated,
  and ``sin D``, ``cos D`` of ``D = theta1 - theta2`` come from the angle
  addition identities applied to these fresh values (nothing is carried from
  stage to stage, so no error accumulates);
* ``sin``/``cos`` are libm's (``math.sin``/``math.cos``, compiled by numba
  to the C library calls): a hand-written polynomial was measured only about
  3 % faster, not worth owning.

This module imports numba at import time; :mod:`coursehub.pendulum.physics`
imports it lazily and falls back to numpy when numba is not installed.
"""

from __future__ import annotations

import math
from typing import Any

import numba


def _jit(**options: Any) -> Any:
    """``numba.njit`` with an on-disk cache where one can be written, without one otherwise."""

    def decorate(fn: Any) -> Any:
        try:
            return numba.njit(cache=True, error_model="numpy", **options)(fn)
        except RuntimeError:  # numba: "no locator available" for a read-only install
            return numba.njit(cache=False, error_model="numpy", **options)(fn)

    return decorate


@_jit(inline="always")
def sincos(x: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(sin x, cos x)`` in float64, from libm."""
    return math.sin(x), math.cos(x)


@_jit(inline="always")
def _alphas(
    t1: float, w1: float, t2: float, w2: float, a: float, b: float, c: float, k1: float, k2: float
) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(theta1'', theta2'')`` by Cramer's rule, as ``physics._rates``."""
    s1, c1 = sincos(t1)
    s2, c2 = sincos(t2)
    sin_d = s1 * c2 - c1 * s2
    c_cos_d = c * (c1 * c2 + s1 * s2)
    r1 = -c * sin_d * (w2 * w2) - k1 * s1
    r2 = c * sin_d * (w1 * w1) - k2 * s2
    det = a * b - c_cos_d * c_cos_d
    return (b * r1 - c_cos_d * r2) / det, (a * r2 - c_cos_d * r1) / det


@_jit()
def advance(
    y: Any,
    out: Any,
    first: int,
    n_samples: int,
    h: float,
    substeps: int,
    a: float,
    b: float,
    c: float,
    k1: float,
    k2: float,
) -> None:  # pragma: no cover - compiled
    """Advance every trajectory ``n_samples`` samples of ``substeps`` RK4 steps of ``h``.

    Parameters
    ----------
    y : ndarray, shape (4 n,), float64, C order
        States ``[theta1, omega1, theta2, omega2]`` of the n trajectories, one
        after the other; updated in place to the last sample.
    out : ndarray, shape (n, n_total, 4), float64
        Sample ``first + i`` of trajectory ``j`` is written to ``out[j, first + i]``.
    first, n_samples : int
    h : float
        Step in s.
    substeps : int
    a, b, c, k1, k2 : float
        :class:`~coursehub.pendulum.physics.PendulumParams` coefficients.
    """
    half = 0.5 * h
    sixth = h / 6.0
    for j in range(y.shape[0] // 4):
        t1 = y[4 * j]
        w1 = y[4 * j + 1]
        t2 = y[4 * j + 2]
        w2 = y[4 * j + 3]
        for i in range(n_samples):
            for _ in range(substeps):
                p1, p2 = _alphas(t1, w1, t2, w2, a, b, c, k1, k2)
                u1 = w1 + half * p1
                u2 = w2 + half * p2
                q1, q2 = _alphas(t1 + half * w1, u1, t2 + half * w2, u2, a, b, c, k1, k2)
                v1 = w1 + half * q1
                v2 = w2 + half * q2
                r1, r2 = _alphas(t1 + half * u1, v1, t2 + half * u2, v2, a, b, c, k1, k2)
                x1 = w1 + h * r1
                x2 = w2 + h * r2
                s1, s2 = _alphas(t1 + h * v1, x1, t2 + h * v2, x2, a, b, c, k1, k2)
                t1 = t1 + sixth * (w1 + 2.0 * (u1 + v1) + x1)
                w1 = w1 + sixth * (p1 + 2.0 * (q1 + r1) + s1)
                t2 = t2 + sixth * (w2 + 2.0 * (u2 + v2) + x2)
                w2 = w2 + sixth * (p2 + 2.0 * (q2 + r2) + s2)
            out[j, first + i, 0] = t1
            out[j, first + i, 1] = w1
            out[j, first + i, 2] = t2
            out[j, first + i, 3] = w2
        y[4 * j] = t1
        y[4 * j + 1] = w1
        y[4 * j + 2] = t2
        y[4 * j + 3] = w2
