"""Double pendulum with point masses: equations of motion, energy, integrators.

State layout everywhere: ``[theta1, omega1, theta2, omega2]`` on the last
axis, angles in radians from the downward vertical, angular velocities in
rad/s. Time in seconds, energy in joules.

Equations: Lagrange's equations of two point masses on massless rigid rods,
from the Lagrangian of L. D. Landau and E. M. Lifshitz, *Mechanics*, 3rd ed.,
section 5, problem 1 (the double plane pendulum; chaos in it: T. Shinbrot et
al., "Chaos in a double pendulum", Am. J. Phys. 60, 491, 1992), written with
``D = theta1 - theta2`` as the workload of DP-Buffat-v1, this project's
benchmark (:mod:`coursehub.pendulum.metrics`)::

    a th1'' + c cos(D) th2'' = -c sin(D) th2'^2 - k1 sin(th1)
    c cos(D) th1'' + b th2'' =  c sin(D) th1'^2 - k2 sin(th2)

    a = (m1 + m2) L1^2,  b = m2 L2^2,  c = m2 L1 L2,
    k1 = (m1 + m2) g L1, k2 = m2 g L2

    E = a th1'^2 / 2 + b th2'^2 / 2 + c th1' th2' cos(D) - k1 cos(th1) - k2 cos(th2)

The 2x2 mass-matrix system is solved in closed form (Cramer's rule; its
determinant ``a b - c^2 cos^2 D = m2 L1^2 L2^2 (m1 + m2 sin^2 D)`` is > 0), so
every function is vectorised over any leading batch shape. Only numpy is
imported at module level; scipy is imported inside :func:`integrate_reference`
and numba (the compiled RK4 of :mod:`coursehub.pendulum.rk4kernel`, optional:
the ``workload`` extra) inside :func:`integrate_rk4`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from coursehub.errors import CoursehubError, UsageError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class PendulumParams:
    """Physical parameters of the double pendulum.

    The defaults are the values of the course's original notebook, those of
    DP-Buffat-v1: point masses ``m1 = 2 kg``,
    ``m2 = 1 kg`` on rods ``l1 = 1.4 m``, ``l2 = 1.0 m``, ``g = 9.8 m/s^2``.

    Raises
    ------
    UsageError
        If a value is not a finite positive number.
    """

    m1: float = 2.0
    m2: float = 1.0
    l1: float = 1.4
    l2: float = 1.0
    g: float = 9.8

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UsageError(f"pendulum parameter {name}={value!r} is not a number")
            if not (math.isfinite(value) and value > 0):
                raise UsageError(
                    f"pendulum parameter {name}={value!r} is out of range: "
                    "it must be a finite number > 0"
                )

    @property
    def a(self) -> float:
        """``(m1 + m2) l1^2`` in kg m^2."""
        return (self.m1 + self.m2) * self.l1**2

    @property
    def b(self) -> float:
        """``m2 l2^2`` in kg m^2."""
        return self.m2 * self.l2**2

    @property
    def c(self) -> float:
        """``m2 l1 l2`` in kg m^2."""
        return self.m2 * self.l1 * self.l2

    @property
    def k1(self) -> float:
        """``(m1 + m2) g l1`` in J."""
        return (self.m1 + self.m2) * self.g * self.l1

    @property
    def k2(self) -> float:
        """``m2 g l2`` in J."""
        return self.m2 * self.g * self.l2

    @property
    def e_min(self) -> float:
        """Energy at rest hanging down, ``-(k1 + k2)`` in J (-50.96 J for the defaults)."""
        return -(self.k1 + self.k2)

    @property
    def e_top(self) -> float:
        """Energy at rest with both arms upright, ``k1 + k2`` in J (+50.96 J for the defaults)."""
        return self.k1 + self.k2


def _rates(
    th1: FloatArray, w1: FloatArray, th2: FloatArray, w2: FloatArray, p: PendulumParams
) -> tuple[FloatArray, FloatArray]:
    """Angular accelerations ``(th1'', th2'')`` by Cramer's rule on the 2x2 system."""
    d = th1 - th2
    sin_d = np.sin(d)
    c_cos_d = p.c * np.cos(d)
    r1 = -p.c * sin_d * (w2 * w2) - p.k1 * np.sin(th1)
    r2 = p.c * sin_d * (w1 * w1) - p.k2 * np.sin(th2)
    det = p.a * p.b - c_cos_d * c_cos_d
    return (p.b * r1 - c_cos_d * r2) / det, (p.a * r2 - c_cos_d * r1) / det


def _as_states(state: ArrayLike) -> FloatArray:
    array = np.asarray(state, dtype=np.float64)
    if array.ndim == 0 or array.shape[-1] != 4:
        raise UsageError(
            f"pendulum state must have shape (..., 4) = [theta1, omega1, theta2, omega2], "
            f"got shape {array.shape}"
        )
    return array


def accelerations(state: ArrayLike, params: PendulumParams = PendulumParams()) -> FloatArray:
    """Angular accelerations from the equations of motion (module docstring).

    Parameters
    ----------
    state : array_like, shape (..., 4)
        ``[theta1, omega1, theta2, omega2]`` in rad and rad/s.
    params : PendulumParams

    Returns
    -------
    ndarray, shape (..., 2)
        ``[theta1'', theta2'']`` in rad/s^2.

    Raises
    ------
    UsageError
        If the last axis of ``state`` is not of length 4.
    """
    s = _as_states(state)
    alpha1, alpha2 = _rates(s[..., 0], s[..., 1], s[..., 2], s[..., 3], params)
    return np.stack([alpha1, alpha2], axis=-1)


def derivatives(state: ArrayLike, params: PendulumParams = PendulumParams()) -> FloatArray:
    """Time derivative of the state, ``[omega1, theta1'', omega2, theta2'']``.

    Parameters
    ----------
    state : array_like, shape (..., 4)
    params : PendulumParams

    Returns
    -------
    ndarray, shape (..., 4)
        In rad/s and rad/s^2.
    """
    s = _as_states(state)
    alpha1, alpha2 = _rates(s[..., 0], s[..., 1], s[..., 2], s[..., 3], params)
    return np.stack([s[..., 1], alpha1, s[..., 3], alpha2], axis=-1)


def energy(state: ArrayLike, params: PendulumParams = PendulumParams()) -> FloatArray:
    """Total mechanical energy (kinetic + potential) in J (module docstring).

    Parameters
    ----------
    state : array_like, shape (..., 4)
    params : PendulumParams

    Returns
    -------
    ndarray, shape (...)
        Energy in J; the zero of potential energy is at the pivot, so it lies
        in ``[params.e_min, +inf)``.
    """
    s = _as_states(state)
    th1, w1, th2, w2 = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
    kinetic = 0.5 * params.a * w1**2 + 0.5 * params.b * w2**2
    kinetic = kinetic + params.c * w1 * w2 * np.cos(th1 - th2)
    return np.asarray(kinetic - params.k1 * np.cos(th1) - params.k2 * np.cos(th2))


def normalized_energy(state: ArrayLike, params: PendulumParams = PendulumParams()) -> FloatArray:
    """Energy scaled so that rest hanging down is 0 and rest upright is 1.

    ``(E - e_min) / (e_top - e_min)``; DP-Buffat-v1
    (:mod:`coursehub.pendulum.metrics`) calls starts below 0.25 regular and
    above 0.45 chaotic.

    Returns
    -------
    ndarray, shape (...)
    """
    return (energy(state, params) - params.e_min) / (params.e_top - params.e_min)


def _flow(z: FloatArray, p: PendulumParams) -> FloatArray:
    """Time derivative of states stored one component per row, shape (4, n)."""
    alpha1, alpha2 = _rates(z[0], z[1], z[2], z[3], p)
    return np.stack([z[1], alpha1, z[3], alpha2])


def _rk4_step(y: FloatArray, h: float, p: PendulumParams) -> FloatArray:
    """One classical RK4 step on ``y`` of shape (4, n); rows keep each ufunc call contiguous."""
    k1 = _flow(y, p)
    k2 = _flow(y + (0.5 * h) * k1, p)
    k3 = _flow(y + (0.5 * h) * k2, p)
    k4 = _flow(y + h * k3, p)
    return y + (h / 6.0) * (k1 + 2.0 * (k2 + k3) + k4)


BACKENDS = ("auto", "numba", "numpy")


def compiled_kernel() -> Any:
    """The numba RK4 kernel module, or None when numba is not installed.

    Imported on first use (numba costs about half a second to import), so
    ``coursehub --help`` and the numpy-only core never load it.
    """
    try:
        from coursehub.pendulum import rk4kernel
    except ImportError:
        return None
    return rk4kernel


def integrate_rk4(
    y0: ArrayLike,
    dt: float,
    n_steps: int,
    substeps: int = 8,
    params: PendulumParams = PendulumParams(),
    progress: Callable[[int], None] | None = None,
    backend: str = "auto",
) -> FloatArray:
    """Integrate many trajectories at once with fixed-step classical RK4.

    Each output interval ``dt`` is covered by ``substeps`` RK4 steps of
    ``dt / substeps``. With the course's ``dt = 1/30 s`` and 8 sub-steps the
    energy error over 25 s stays below about 1.6e-6 of ``e_top - e_min``
    (measured: ``benchmarks/bench_generate.py`` prints it; classical RK4:
    E. Hairer, S. P. Norsett, G. Wanner, *Solving Ordinary Differential
    Equations I*, section II.1). Two implementations of the same method:
    ``"numba"``, a compiled loop over trajectories
    (:mod:`coursehub.pendulum.rk4kernel`, about 5x faster, single-threaded),
    and ``"numpy"``, all trajectories advanced together as vectorised numpy
    operations. They agree to rounding (about 1e-15 per step); chaotic
    trajectories amplify that, as they do any change of floating-point order.

    Parameters
    ----------
    y0 : array_like, shape (n, 4)
        Initial states ``[theta1, omega1, theta2, omega2]``.
    dt : float
        Sample interval in s (> 0).
    n_steps : int
        Number of samples after the initial one (>= 0).
    substeps : int
        RK4 steps per sample (>= 1).
    params : PendulumParams
    progress : callable, optional
        Called with the number of samples just completed (1) after each sample.
    backend : {"auto", "numba", "numpy"}
        ``"auto"`` takes numba when it is installed, numpy otherwise.

    Returns
    -------
    ndarray, shape (n, n_steps + 1, 4)
        States at ``t = 0, dt, ..., n_steps dt``; ``out[:, 0]`` equals ``y0``.

    Raises
    ------
    UsageError
        If ``y0`` is not (n, 4), ``dt``, ``n_steps`` or ``substeps`` is out of
        range, ``backend`` is unknown, or ``"numba"`` is asked for without numba.
    """
    y = _as_states(y0)
    if y.ndim != 2:
        raise UsageError(f"y0 must have shape (n, 4), got shape {y.shape}")
    check_steps(dt, n_steps, substeps)
    if backend not in BACKENDS:
        raise UsageError(f"backend={backend!r} is unknown: use one of {', '.join(BACKENDS)}")
    kernel = None if backend == "numpy" else compiled_kernel()
    if kernel is None and backend == "numba":
        raise UsageError(
            "backend='numba' needs numba: install it with pip install 'coursehub[workload]'"
        )
    out = np.empty((y.shape[0], n_steps + 1, 4))
    out[:, 0] = y
    h = dt / substeps
    if kernel is not None:
        flat = np.array(y, dtype=np.float64, order="C").reshape(-1)
        coefficients = (params.a, params.b, params.c, params.k1, params.k2)
        if progress is None:
            kernel.advance(flat, out, 1, n_steps, h, substeps, *coefficients)
        else:
            for i in range(1, n_steps + 1):
                kernel.advance(flat, out, i, 1, h, substeps, *coefficients)
                progress(1)
        return out
    rows = np.ascontiguousarray(y.T)
    for i in range(1, n_steps + 1):
        for _ in range(substeps):
            rows = _rk4_step(rows, h, params)
        out[:, i] = rows.T
        if progress is not None:
            progress(1)
    return out


def check_steps(dt: float, n_steps: int, substeps: int) -> None:
    """Raise :class:`UsageError` unless ``dt > 0`` (finite), ``n_steps >= 0``, ``substeps >= 1``."""
    if not (math.isfinite(dt) and dt > 0):
        raise UsageError(f"dt={dt!r} is out of range: it must be a finite time step > 0 s")
    if n_steps < 0:
        raise UsageError(f"n_steps={n_steps!r} is out of range: it must be >= 0")
    if substeps < 1:
        raise UsageError(f"substeps={substeps!r} is out of range: it must be >= 1")


def integrate_reference(
    y0: ArrayLike, t: ArrayLike, params: PendulumParams = PendulumParams()
) -> FloatArray:
    """Integrate one trajectory accurately with scipy's DOP853 (rtol = atol = 1e-10).

    The slow, adaptive reference against which :func:`integrate_rk4` is
    checked (``scipy.integrate.solve_ivp``, Dormand-Prince 8(5,3)).

    Parameters
    ----------
    y0 : array_like, shape (4,)
        Initial state.
    t : array_like, shape (m,)
        Increasing output times in s; integration starts at ``t[0]``.
    params : PendulumParams

    Returns
    -------
    ndarray, shape (m, 4)
        States at the times ``t``.

    Raises
    ------
    UsageError
        If ``y0`` is not of shape (4,) or ``t`` is not increasing.
    CoursehubError
        If the solver fails.
    """
    from scipy.integrate import solve_ivp

    y = _as_states(y0)
    times = np.asarray(t, dtype=np.float64)
    if y.shape != (4,) or times.ndim != 1 or times.size == 0 or np.any(np.diff(times) <= 0):
        raise UsageError("integrate_reference needs y0 of shape (4,) and increasing times t")

    if times.size == 1:
        return y[None].copy()

    def fun(_t: float, z: FloatArray) -> FloatArray:
        return _flow(z, params)

    span = (times[0], times[-1])
    sol = solve_ivp(fun, span, y, method="DOP853", t_eval=times, rtol=1e-10, atol=1e-10)
    if not sol.success:
        raise CoursehubError(f"DOP853 reference integration failed: {sol.message}")
    return np.asarray(sol.y.T)
