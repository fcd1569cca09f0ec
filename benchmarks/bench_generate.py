"""RK4 dataset generation against the course's method: one ``odeint`` call per trajectory.

RK4 runs in both implementations of ``integrate_rk4``: the compiled numba
kernel (the default when numba is installed) and the batched numpy one (the
fallback, and the only one before). All integrate 25 s of the double
pendulum released at rest from ``theta1, theta2 ~ U(-pi, pi)`` (seed 0),
sampled at ``dt = 1/30 s`` (the data of DP-Buffat-v1,
:mod:`coursehub.pendulum.metrics`). Printed for each method: trajectories
per second (best of ``REPEATS`` runs, one process, numpy's single-threaded ufuncs) and
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

With ``--rounds N`` (default 3) the numba kernel, the numpy RK4 and odeint
(math rhs, ``ODEINT_TOL``) are timed in turn N times, interleaved, and the
speed-ups are printed per round and as median and range, since a shared
machine is noisy; the odeint runs at other settings follow once.

Run: ``.venv/bin/python benchmarks/bench_generate.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
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
    """The equations of motion of :mod:`coursehub.pendulum.physics`, one state, with ``math``."""
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


def run_rk4(y0: np.ndarray, backend: str) -> np.ndarray:
    return integrate_rk4(y0, DT, N_STEPS, SUBSTEPS, PARAMS, backend=backend)


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.1f}x (range {min(values):.1f}-{max(values):.1f}x)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    rounds = parser.parse_args().rounds
    y0 = starts(N_RK4)
    few = y0[:N_ODEINT]
    run_rk4(y0[:2], "numba")  # compile (or load numba's cache) outside the timings
    print(f"25 s at dt = 1/30 s ({N_STEPS} steps), rest starts, seed 0; best of {REPEATS}")
    math_rhs = scalar_rhs(PARAMS)
    ratios: dict[str, list[float]] = {"numba": [], "numpy": [], "numba/numpy": []}
    for r in range(1, rounds + 1):
        print(f"-- round {r} of {rounds}")
        rates, errors = {}, {}
        for backend in ("numba", "numpy"):
            seconds, states = best_time(partial(run_rk4, y0, backend))
            errors[backend] = energy_errors(states)
            name = f"RK4 {SUBSTEPS} sub-steps, {backend}"
            rates[backend] = report(name, N_RK4, seconds, errors[backend])
        seconds, states = best_time(partial(run_odeint, few, math_rhs, ODEINT_TOL))
        odeint_errors = energy_errors(states)
        name = f"odeint, math rhs, rtol=atol={ODEINT_TOL:g}"
        rates["odeint"] = report(name, N_ODEINT, seconds, odeint_errors)
        for backend in ("numba", "numpy"):
            ratios[backend].append(rates[backend] / rates["odeint"])
        ratios["numba/numpy"].append(rates["numba"] / rates["numpy"])
    first = errors["numba"][:N_ODEINT]
    fair = np.median(odeint_errors) <= np.median(first) and odeint_errors.max() <= first.max()
    print(
        f"RK4 (numba) on the {N_ODEINT} odeint starts: energy error median "
        f"{np.median(first):.2e} max {first.max():.2e}; odeint at {ODEINT_TOL:g} is "
        + ("at or below both" if fair else "NOT at or below both: tighten ODEINT_TOL")
    )
    print(f"speed-up of RK4 (numba) over odeint: {spread(ratios['numba'])}")
    print(f"speed-up of RK4 (numpy) over odeint: {spread(ratios['numpy'])}")
    print(f"numba kernel over numpy RK4: {spread(ratios['numba/numpy'])}")
    for name, rhs, tol in [
        ("odeint, math rhs, default tolerances", math_rhs, ODEINT_DEFAULT_TOL),
        (f"odeint, derivatives() rhs, rtol=atol={ODEINT_TOL:g}", vectorised_rhs, ODEINT_TOL),
    ]:
        seconds, states = best_time(partial(run_odeint, few, rhs, tol))
        rate = report(name, N_ODEINT, seconds, energy_errors(states))
        print(f"{'':<44} RK4 (numba) is {rates['numba'] / rate:.1f}x faster (last round)")
    start = time.perf_counter()
    ds = generate_dataset(1000, seed=0, progress=False)
    print(
        f"generate_dataset(1000 trajectories, 25 s): {time.perf_counter() - start:.2f} s, "
        f"{int((~ds.valid).sum())} flagged, max energy error {ds.energy_error.max():.2e}"
    )


if __name__ == "__main__":
    main()
