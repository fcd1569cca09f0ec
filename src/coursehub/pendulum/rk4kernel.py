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
* ``sin``/``cos`` are evaluated by :func:`sincos`: Cody-Waite reduction by
  ``pi/2`` with the three-part constant of fdlibm's ``e_rem_pio2.c``
  (https://www.netlib.org/fdlibm/e_rem_pio2.c: ``pio2_1``, ``pio2_2``,
  ``pio2_3``, 33 + 33 + 53 bits) and Taylor polynomials to degree 17/18 on
  ``|r| <= pi/4`` (truncation below 1e-19), within 1 ulp of 1 of libm in
  absolute terms; beyond ``|x| = SINCOS_EXACT_LIMIT`` it calls libm.

This module imports numba at import time; :mod:`coursehub.pendulum.physics`
imports it lazily and falls back to numpy when numba is not installed.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

# fdlibm e_rem_pio2.c: pi/2 = PIO2_1 + PIO2_2 + PIO2_3 (+ 8.5e-32), the first two with 33 bits.
PIO2_1 = 1.57079632673412561417e00
PIO2_2 = 6.07710050630396597660e-11
PIO2_3 = 2.02226624871116645580e-21
TWO_OVER_PI = 6.36619772367581382433e-01
# k * PIO2_1 and k * PIO2_2 are exact while |k| < 2**20 (33 + 20 bits <= 53).
SINCOS_EXACT_LIMIT = 2.0**19 * math.pi
# Taylor coefficients (-1)^k / (2k+1)! for r^3 ... r^17 and (-1)^k / (2k)! for r^2 ... r^18.
_S = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9)]
_C = [(-1) ** k / math.factorial(2 * k) for k in range(1, 10)]
S1, S2, S3, S4, S5, S6, S7, S8 = _S
C1, C2, C3, C4, C5, C6, C7, C8, C9 = _C


def _jit(**options: Any) -> Any:
    """``numba.njit`` with an on-disk cache where one can be written, without one otherwise."""

    def decorate(fn: Any) -> Any:
        try:
            return numba.njit(cache=True, **options)(fn)
        except RuntimeError:  # numba: "no locator available" for a read-only install
            return numba.njit(cache=False, **options)(fn)

    return decorate


@_jit(inline="always")
def sincos(x: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """``(sin x, cos x)`` in float64, absolute error <= 2.3e-16 (module docstring)."""
    if not abs(x) < SINCOS_EXACT_LIMIT:  # huge or NaN: libm (NaN propagates)
        return math.sin(x), math.cos(x)
    k = np.floor(x * TWO_OVER_PI + 0.5)
    r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3
    z = r * r
    s = r + r * z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * (S6 + z * (S7 + z * S8)))))))
    c = 1.0 + z * (
        C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * (C6 + z * (C7 + z * (C8 + z * C9)))))))
    )
    # Quadrant k mod 4 -> (sin, cos): 0 (s, c), 1 (c, -s), 2 (-s, -c), 3 (-c, s); selects, no branches.
    quadrant = k - 4.0 * np.floor(k * 0.25)
    upper = np.floor(quadrant * 0.5)  # 0 for quadrants 0, 1; 1 for 2, 3
    odd = quadrant - 2.0 * upper
    turned = quadrant + 1.0 - 4.0 * np.floor((quadrant + 1.0) * 0.25)
    sin_sign = 1.0 - 2.0 * upper
    cos_sign = 1.0 - 2.0 * np.floor(turned * 0.5)
    return sin_sign * (c if odd > 0.5 else s), cos_sign * (s if odd > 0.5 else c)


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
