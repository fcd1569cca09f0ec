"""Double-pendulum physics against independent formulations and references."""

import importlib.util

import numpy as np
import pytest
from scipy.linalg import eigh

from coursehub.errors import UsageError
from coursehub.pendulum import physics
from coursehub.pendulum.physics import (
    PendulumParams,
    accelerations,
    derivatives,
    energy,
    integrate_reference,
    integrate_rk4,
    normalized_energy,
)

PARAMS = PendulumParams()
E_RANGE = PARAMS.e_top - PARAMS.e_min
HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed")
BACKENDS = ["numpy", pytest.param("numba", marks=needs_numba)]


def random_states(n, seed, rest=False):
    rng = np.random.default_rng(seed)
    states = np.empty((n, 4))
    states[:, [0, 2]] = rng.uniform(-np.pi, np.pi, size=(n, 2))
    states[:, [1, 3]] = 0.0 if rest else rng.normal(scale=3.0, size=(n, 2))
    return states


def cartesian_lagrangian(q, v, p):
    """L = T - V from the Cartesian positions and velocities of the two point masses."""
    th1, th2, w1, w2 = q[..., 0], q[..., 1], v[..., 0], v[..., 1]
    y1 = -p.l1 * np.cos(th1)
    y2 = y1 - p.l2 * np.cos(th2)
    vx1, vy1 = p.l1 * np.cos(th1) * w1, p.l1 * np.sin(th1) * w1
    vx2, vy2 = vx1 + p.l2 * np.cos(th2) * w2, vy1 + p.l2 * np.sin(th2) * w2
    kinetic = 0.5 * p.m1 * (vx1**2 + vy1**2) + 0.5 * p.m2 * (vx2**2 + vy2**2)
    return kinetic - p.g * (p.m1 * y1 + p.m2 * y2), kinetic + p.g * (p.m1 * y1 + p.m2 * y2)


def euler_lagrange_accelerations(states, p, hq=1e-4, hv=1e-2):
    """Solve M(q) q'' = dL/dq - (d2L/dv dq) v with finite-difference derivatives of L.

    L is quadratic in v, so differences in v are exact up to rounding and may be large.
    """
    q, v = states[:, [0, 2]], states[:, [1, 3]]
    eq, ev = np.eye(2) * hq, np.eye(2) * hv

    def lag(dq, dv):
        return cartesian_lagrangian(q + dq, v + dv, p)[0]

    dl_dq = np.stack([(lag(e, 0) - lag(-e, 0)) / (2 * hq) for e in eq], axis=-1)
    mass = np.empty((len(states), 2, 2))
    mixed = np.empty((len(states), 2, 2))
    for i in range(2):
        for j in range(2):
            vi, vj, qj = ev[i], ev[j], eq[j]
            mass[:, i, j] = lag(0, vi + vj) - lag(0, vi - vj) - lag(0, vj - vi) + lag(0, -vi - vj)
            mixed[:, i, j] = lag(qj, vi) - lag(-qj, vi) - lag(qj, -vi) + lag(-qj, -vi)
    mass /= 4 * hv * hv
    mixed /= 4 * hq * hv
    rhs = dl_dq - np.einsum("nij,nj->ni", mixed, v)
    return np.linalg.solve(mass, rhs[..., None])[..., 0]


def test_default_params_are_the_course_values():
    assert (PARAMS.m1, PARAMS.m2, PARAMS.l1, PARAMS.l2, PARAMS.g) == (2.0, 1.0, 1.4, 1.0, 9.8)
    assert PARAMS.e_min == pytest.approx(-50.96)
    assert PARAMS.e_top == pytest.approx(50.96)


@pytest.mark.parametrize(
    "bad",
    [
        {"m1": 0.0},
        {"l2": -1.0},
        {"g": float("nan")},
        {"m2": float("inf")},
        {"l1": "1.4"},
        {"g": True},
    ],
)
def test_params_out_of_range_raise_usage_error(bad):
    name = next(iter(bad))
    with pytest.raises(UsageError, match=name):
        PendulumParams(**bad)


@pytest.mark.parametrize("params", [PARAMS, PendulumParams(m1=0.5, m2=3.0, l1=0.7, l2=2.0, g=1.6)])
def test_accelerations_match_cartesian_euler_lagrange(params):
    states = random_states(200, seed=1)
    expected = euler_lagrange_accelerations(states, params)
    np.testing.assert_allclose(accelerations(states, params), expected, rtol=1e-5, atol=1e-5)


def test_energy_matches_cartesian_energy():
    states = random_states(100, seed=2)
    params = PendulumParams(m1=1.3, m2=0.4, l1=0.9, l2=1.7, g=9.81)
    cartesian = cartesian_lagrangian(states[:, [0, 2]], states[:, [1, 3]], params)[1]
    np.testing.assert_allclose(energy(states, params), cartesian, rtol=1e-12, atol=1e-10)


def test_energy_rate_along_the_flow_is_zero():
    states = random_states(100, seed=3)
    h = 1e-5
    flow = derivatives(states)
    rate = (energy(states + h * flow) - energy(states - h * flow)) / (2 * h)
    power_scale = np.abs(flow).max(axis=1) * E_RANGE
    assert np.all(np.abs(rate) < 1e-6 * power_scale)


def test_batch_shapes_and_bad_shape():
    states = random_states(24, seed=4).reshape(2, 3, 4, 4)
    assert accelerations(states).shape == (2, 3, 4, 2)
    assert derivatives(states).shape == (2, 3, 4, 4)
    assert energy(states).shape == (2, 3, 4)
    np.testing.assert_array_equal(derivatives(states)[..., [0, 2]], states[..., [1, 3]])
    with pytest.raises(UsageError, match=r"\(\.\.\., 4\)"):
        energy(np.zeros((3, 5)))


def test_normalized_energy_is_zero_down_and_one_upright():
    rest = np.array([[0.0, 0.0, 0.0, 0.0], [np.pi, 0.0, np.pi, 0.0], [np.pi, 0.0, 0.0, 0.0]])
    expected_mid = (PARAMS.k1 - PARAMS.k2 - PARAMS.e_min) / E_RANGE
    np.testing.assert_allclose(normalized_energy(rest), [0.0, 1.0, expected_mid], atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rk4_conserves_energy_over_25_s(backend):
    y0 = random_states(20, seed=5, rest=True)
    out = integrate_rk4(y0, dt=1 / 30, n_steps=750, substeps=8, backend=backend)
    assert out.shape == (20, 751, 4)
    np.testing.assert_array_equal(out[:, 0], y0)
    e = energy(out)
    error = np.abs(e - e[:, :1]).max(axis=1) / E_RANGE
    assert np.median(error) < 1.6e-6
    assert error.max() < 1e-5


@pytest.mark.parametrize("backend", BACKENDS)
def test_rk4_agrees_with_dop853_over_3_s(backend):
    y0 = np.array([[0.3, 0, -0.2, 0], [1.5, 0, 2.0, 0], [2.8, 0, -2.5, 0], [-3.0, 0, 3.1, 0]])
    t = np.arange(91) / 30
    rk4 = integrate_rk4(y0, dt=1 / 30, n_steps=90, substeps=8, backend=backend)
    for start, path in zip(y0, rk4, strict=True):
        reference = integrate_reference(start, t)
        assert reference.shape == (91, 4)
        np.testing.assert_allclose(path, reference, atol=1e-4, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_angles_follow_the_linear_normal_modes(backend):
    # Linearised about rest: M q'' = -K q with M = [[a, c], [c, b]], K = diag(k1, k2).
    mass = np.array([[PARAMS.a, PARAMS.c], [PARAMS.c, PARAMS.b]])
    stiffness = np.diag([PARAMS.k1, PARAMS.k2])
    omega_sq, modes = eigh(stiffness, mass)  # modes.T @ mass @ modes = I
    q0 = np.array([[0.01, 0.0], [0.0, -0.01], [0.008, 0.006]])
    t = np.arange(151) / 30
    amplitudes = q0 @ mass @ modes  # (n, 2) modal coordinates at rest
    linear = np.einsum("nk,tk,ik->nti", amplitudes, np.cos(np.sqrt(omega_sq) * t[:, None]), modes)
    y0 = np.zeros((3, 4))
    y0[:, [0, 2]] = q0
    angles = integrate_rk4(y0, dt=1 / 30, n_steps=150, backend=backend)[..., [0, 2]]
    assert np.abs(angles - linear).max() < 1e-3 * 0.01
    assert np.abs(linear).max() > 0.005  # the comparison is not between near-zero signals


@pytest.mark.parametrize(
    ("dt", "n_steps", "substeps"),
    [(0.0, 5, 8), (-0.1, 5, 8), (float("nan"), 5, 8), (0.1, -1, 8), (0.1, 5, 0)],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_rk4_rejects_bad_steps(dt, n_steps, substeps, backend):
    with pytest.raises(UsageError, match="out of range"):
        integrate_rk4(np.zeros((2, 4)), dt, n_steps, substeps, backend=backend)


def test_rk4_rejects_unbatched_start():
    with pytest.raises(UsageError, match=r"\(n, 4\)"):
        integrate_rk4(np.zeros(4), 0.1, 5)


def test_reference_at_a_single_time_is_the_start():
    start = np.array([0.1, 0.2, -0.3, 0.4])
    np.testing.assert_array_equal(integrate_reference(start, np.array([2.0])), start[None])


def test_reference_rejects_bad_times():
    with pytest.raises(UsageError, match="increasing"):
        integrate_reference(np.zeros(4), np.array([0.0, 1.0, 0.5]))


@needs_numba
@pytest.mark.parametrize(
    ("params", "rest", "n_steps", "substeps"),
    [
        (PARAMS, True, 30, 8),
        (PARAMS, False, 30, 1),
        (PendulumParams(m1=0.5, m2=3.0, l1=0.7, l2=2.0, g=1.6), False, 20, 3),
        (PendulumParams(m1=1.0, m2=1.0, l1=1.0, l2=1.0, g=9.81), True, 0, 8),
    ],
)
def test_the_compiled_and_numpy_rk4_agree_to_rounding(params, rest, n_steps, substeps):
    # One second or less: short enough that chaos cannot amplify rounding past 1e-9.
    y0 = random_states(7, seed=11, rest=rest)
    compiled = integrate_rk4(y0, 1 / 30, n_steps, substeps, params, backend="numba")
    vectorised = integrate_rk4(y0, 1 / 30, n_steps, substeps, params, backend="numpy")
    assert compiled.shape == (7, n_steps + 1, 4)
    np.testing.assert_array_equal(compiled[:, 0], y0)
    np.testing.assert_allclose(compiled, vectorised, rtol=0, atol=1e-9)


@needs_numba
def test_the_compiled_rk4_reports_progress_once_per_sample_without_changing_the_result():
    y0 = random_states(3, seed=2)
    calls = []
    with_bar = integrate_rk4(y0, 1 / 30, 12, backend="numba", progress=calls.append)
    assert calls == [1] * 12
    np.testing.assert_array_equal(with_bar, integrate_rk4(y0, 1 / 30, 12, backend="numba"))


def test_auto_falls_back_to_numpy_when_numba_is_missing(monkeypatch):
    y0 = random_states(4, seed=3)
    monkeypatch.setattr(physics, "compiled_kernel", lambda: None)
    np.testing.assert_array_equal(
        integrate_rk4(y0, 1 / 30, 10), integrate_rk4(y0, 1 / 30, 10, backend="numpy")
    )
    with pytest.raises(UsageError, match=r"numba.*coursehub\[workload\]"):
        integrate_rk4(y0, 1 / 30, 10, backend="numba")


@pytest.mark.parametrize("backend", ["torch", "", "NUMBA"])
def test_an_unknown_backend_is_a_usage_error_naming_the_choices(backend):
    with pytest.raises(UsageError, match=r"backend=.*auto, numba, numpy"):
        integrate_rk4(np.zeros((2, 4)), 0.1, 5, backend=backend)
