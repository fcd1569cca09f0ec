"""Batched RK4 against the course's method: one ``scipy.integrate.odeint`` call per trajectory.

Both integrate 25 s of the double pendulum released at rest from
``theta1, theta2 ~ U(-pi, pi)`` (seed 0), sampled at ``dt = 1/30 s``
(REFERENCE.md section 8). Printed for each method: trajectories per second
(best of ``REPEATS`` runs, one process, numpy's single-threaded ufuncs) and
the energy error ``max_t |E(t) - E(0)| / (e_top - e_min)`` (median and max
over the trajectories), then the speed ratio and the wall time of generating
the full 1,000-trajectory dataset.

odeint is run at ``rtol = atol = ODEINT_TOL`` (1e-9), the loosest of
1.49e-8 (its default), 1e-8, 3e-9, 1e-9 whose median and max energy error on
these starts are both at or below RK4's, so the comparison is at equal or
better accuracy for odeint; its default tolerances are printed too. Its
right-hand side is a scalar ``math`` function (the fastest plain-Python form);
a run with the package's vectorised ``derivatives`` called on one state, as a
notebook would write it, is printed as well.

Run: ``.venv/bin/python benchmarks/bench_generate.py``. Timings on a shared
machine are rough.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from scipy.integrate import odeint

from coursehub.pendulum.dataset import generate_dataset
from coursehub.pendulum.physics import PendulumParams, derivatives, energy, integrate_rk4

N_RK4 = 1000
N_ODEINT = 50
DT = 1 / 30
N_STEPS = 750  # 25 s
SUBSTEPS = 8
ODEINT_TOL = 1e-9
ODEINT_DEFAULT_TOL = 1.49012e-8
REPEATS = 3
PARAMS = PendulumParams()


def starts(n: int, seed: int = 0) -> np.ndarray:
    """Rest starts with uniform random angles, shape (n, 4)."""
    y0 = np.zeros((n, 4))
    y0[:, [0, 2]] = np.random.default_rng(seed).uniform(-np.pi, np.pi, size=(n, 2))
    return y0


def energy_errors(states: np.ndarray) -> np.ndarray:
    """``max_t |E(t) - E(0)| / (e_top - e_min)`` per trajectory of (n, n_samples, 4)."""
    e = energy(states, PARAMS)
    return np.asarray(np.abs(e - e[:, :1]).max(axis=1) / (PARAMS.e_top - PARAMS.e_min))


def best_time(run: Callable[[], Any]) -> tuple[float, Any]:
    """Best wall time of ``REPEATS`` calls and the last result."""
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def scalar_rhs(p: PendulumParams) -> Callable[[np.ndarray, float], tuple[float, ...]]:
    """The equations of motion for one state with ``math`` (REFERENCE.md section 8 form)."""
    a, b, c, k1, k2 = p.a, p.b, p.c, p.k1, p.k2

    def rhs(y: np.ndarray, _t: float) -> tuple[float, ...]:
        th1, w1, th2, w2 = y
        sin_d, c_cos_d = math.sin(th1 - th2), c * math.cos(th1 - th2)
        r1 = -c * sin_d * w2 * w2 - k1 * math.sin(th1)
        r2 = c * sin_d * w1 * w1 - k2 * math.sin(th2)
        det = a * b - c_cos_d * c_cos_d
        return w1, (b * r1 - c_cos_d * r2) / det, w2, (a * r2 - c_cos_d * r1) / det

    return rhs


def vectorised_rhs(y: np.ndarray, _t: float) -> np.ndarray:
    return derivatives(y, PARAMS)


def run_odeint(y0: np.ndarray, rhs: Callable[..., Any], tol: float) -> np.ndarray:
    t = np.arange(N_STEPS + 1) * DT
    return np.stack([odeint(rhs, start, t, rtol=tol, atol=tol) for start in y0])


def report(name: str, n: int, seconds: float, errors: np.ndarray) -> float:
    rate = n / seconds
    print(
        f"{name:<44} {n:>5} traj {seconds:7.3f} s {rate:9.1f} traj/s   energy error "
        f"median {np.median(errors):.2e} max {errors.max():.2e}"
    )
    return rate


def main() -> None:
    y0 = starts(N_RK4)
    few = y0[:N_ODEINT]
    print(f"25 s at dt = 1/30 s ({N_STEPS} steps), rest starts, seed 0; best of {REPEATS}")
    seconds, states = best_time(lambda: integrate_rk4(y0, DT, N_STEPS, SUBSTEPS, PARAMS))
    errors = energy_errors(states)
    rk4 = report(f"batched RK4, {SUBSTEPS} sub-steps", N_RK4, seconds, errors)
    first = errors[:N_ODEINT]
    print(
        f"{'':<44} on the {N_ODEINT} odeint starts: energy error median "
        f"{np.median(first):.2e} max {first.max():.2e}"
    )
    print(f"{'':<44} {N_RK4 * N_STEPS * SUBSTEPS / seconds / 1e6:.2f} M trajectory-steps/s")
    runs = [
        (f"odeint, math rhs, rtol=atol={ODEINT_TOL:g}", scalar_rhs(PARAMS), ODEINT_TOL),
        ("odeint, math rhs, default tolerances", scalar_rhs(PARAMS), ODEINT_DEFAULT_TOL),
        (f"odeint, derivatives() rhs, rtol=atol={ODEINT_TOL:g}", vectorised_rhs, ODEINT_TOL),
    ]
    rates = []
    for name, rhs, tol in runs:
        seconds, states = best_time(partial(run_odeint, few, rhs, tol))
        rates.append(report(name, N_ODEINT, seconds, energy_errors(states)))
    for (name, _, _), rate in zip(runs, rates, strict=True):
        print(f"speed-up of batched RK4 over {name}: {rk4 / rate:.1f}x")
    start = time.perf_counter()
    ds = generate_dataset(1000, seed=0, progress=False)
    print(
        f"generate_dataset(1000 trajectories, 25 s): {time.perf_counter() - start:.2f} s, "
        f"{int((~ds.valid).sum())} flagged, max energy error {ds.energy_error.max():.2e}"
    )


if __name__ == "__main__":
    main()
