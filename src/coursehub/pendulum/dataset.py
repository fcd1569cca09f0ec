"""Generate double-pendulum trajectories and write a self-describing dataset file.

``coursehub pendulum generate --n-trajectories 1000 --seed 0 --out FILE``
releases each trajectory at rest from ``theta1, theta2 ~ U(-pi, pi)``,
integrates it with the RK4 of :mod:`coursehub.pendulum.physics` (compiled with
numba when the ``workload`` extra is installed, batched numpy otherwise; 25 s
sampled at ``dt = 1/30 s``, 8 sub-steps: the data of DP-Buffat-v1, this
project's benchmark, defined in :mod:`coursehub.pendulum.metrics`), flags
trajectories whose energy drifts by more than ``ENERGY_TOLERANCE`` of
``e_top - e_min``, and splits the others by trajectory into train/val/test.

The record and its file format live in :mod:`coursehub.pendulum.datafile`
and are re-exported here. Only numpy is imported at module level (tqdm and
psutil inside functions).
"""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from coursehub.errors import UsageError
from coursehub.pendulum.datafile import (
    ENERGY_TOLERANCE,
    EXCLUDED,
    SPLIT_CODES,
    PendulumDataset,
    save_dataset,
)
from coursehub.pendulum.physics import (
    PendulumParams,
    check_steps,
    energy,
    integrate_rk4,
    normalized_energy,
)

__all__ = [
    "DEFAULT_DATA_PATH",
    "add_arguments",
    "generate_dataset",
    "make_windows",
    "plan_split",
    "run",
]

DEFAULT_DATA_PATH = Path("data") / "pendulum.npz"
# Trajectories integrated together; bounds the working memory of one batch.
BATCH_SIZE = 2048


def plan_split(
    valid: NDArray[np.bool_], fractions: tuple[float, float, float], rng: np.random.Generator
) -> NDArray[np.int8]:
    """Assign each valid trajectory to train (0), val (1) or test (2); others get -1.

    The valid trajectories are shuffled by ``rng`` and cut by ``fractions``
    (rounded; test takes the rest), so a trajectory is in exactly one split.
    """
    split = np.full(valid.shape, EXCLUDED, dtype=np.int8)
    order = rng.permutation(np.flatnonzero(valid))
    n_train = round(fractions[0] * order.size)
    n_val = min(round(fractions[1] * order.size), order.size - n_train)
    split[order[:n_train]] = SPLIT_CODES["train"]
    split[order[n_train : n_train + n_val]] = SPLIT_CODES["val"]
    split[order[n_train + n_val :]] = SPLIT_CODES["test"]
    return split


def check_generation(
    n_trajectories: int,
    duration_s: float,
    dt: float,
    substeps: int,
    fractions: tuple[float, ...] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> int:
    """Validate generation settings; return the number of steps after t = 0.

    Raises
    ------
    UsageError
        Naming the first setting out of range.
    """
    if n_trajectories <= 0:
        raise UsageError(f"n_trajectories={n_trajectories} is out of range: it must be >= 1")
    check_steps(dt, 0, substeps)
    if not (math.isfinite(duration_s) and duration_s >= dt):
        raise UsageError(f"duration={duration_s!r} s is out of range: it must be >= dt ({dt} s)")
    if len(fractions) != 3 or min(fractions) < 0 or not math.isclose(sum(fractions), 1.0):
        raise UsageError(f"split fractions {fractions} must be three numbers >= 0 summing to 1")
    if seed < 0:
        raise UsageError(f"seed={seed} is out of range: it must be >= 0")
    return round(duration_s / dt)


def generate_dataset(
    n_trajectories: int,
    seed: int = 0,
    params: PendulumParams = PendulumParams(),
    duration_s: float = 25.0,
    dt: float = 1 / 30,
    substeps: int = 8,
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    progress: bool = True,
) -> PendulumDataset:
    """Simulate trajectories released at rest from uniform random angles.

    ``theta1, theta2 ~ U(-pi, pi)``, zero velocities, drawn from
    ``numpy.random.default_rng(seed)``; the same generator then shuffles the
    split. ``round(duration_s / dt) + 1`` samples per trajectory.

    Returns
    -------
    PendulumDataset

    Raises
    ------
    UsageError
        If a setting is out of range (see :func:`check_generation`).
    """
    n_steps = check_generation(n_trajectories, duration_s, dt, substeps, split_fractions, seed)
    rng = np.random.default_rng(seed)
    y0 = np.zeros((n_trajectories, 4))
    y0[:, [0, 2]] = rng.uniform(-np.pi, np.pi, size=(n_trajectories, 2))
    states = np.empty((n_trajectories, n_steps + 1, 4))
    with _progress_bar(n_trajectories * n_steps, enabled=progress) as update:
        for start in range(0, n_trajectories, BATCH_SIZE):
            batch = y0[start : start + BATCH_SIZE]
            advance = None if update is None else _batch_progress(update, len(batch))
            states[start : start + len(batch)] = integrate_rk4(
                batch, dt, n_steps, substeps, params, advance
            )
    error = energy_error(states, params)
    valid = error <= ENERGY_TOLERANCE
    return PendulumDataset(
        states=states,
        dt=float(dt),
        params=params,
        seed=int(seed),
        integrator="rk4",
        substeps=int(substeps),
        energy_error=error,
        energy_norm=normalized_energy(y0, params),
        valid=valid,
        split=plan_split(valid, split_fractions, rng),
    )


def energy_error(states: NDArray[np.float64], params: PendulumParams) -> NDArray[np.float64]:
    """``max_t |E(t) - E(0)| / (e_top - e_min)`` per trajectory, shape (n_traj,)."""
    e = energy(states, params)
    return np.asarray(np.abs(e - e[:, :1]).max(axis=1) / (params.e_top - params.e_min))


@contextlib.contextmanager
def _progress_bar(total: int, enabled: bool) -> Iterator[Callable[[int], Any] | None]:
    """Yield a tqdm bar's ``update`` counting trajectory-samples, or None if disabled."""
    if not enabled:
        yield None
        return
    from tqdm import tqdm  # the text bar: works in a terminal and a notebook alike

    with tqdm(total=total, unit="sample", unit_scale=True, desc="simulating") as bar:
        yield bar.update


def _batch_progress(update: Callable[[int], Any], batch_size: int) -> Callable[[int], None]:
    """Turn "n samples done for this batch" into trajectory-samples for the bar."""

    def advance(n_samples: int) -> None:
        update(n_samples * batch_size)

    return advance


def make_windows(
    states: NDArray[Any], window: int, horizon: int = 1
) -> tuple[NDArray[Any], NDArray[Any]]:
    """Cut trajectories into (input window, following targets) pairs for training.

    Every start position of every trajectory gives one pair, trajectory-major:
    pair ``j * n_per + i`` is trajectory ``j`` from sample ``i``, with
    ``n_per = n_samples - window - horizon + 1``. Built from one
    ``numpy.lib.stride_tricks.sliding_window_view`` (one copy per output);
    the dtype is kept, so float32 states halve the memory.

    Parameters
    ----------
    states : ndarray, shape (n_traj, n_samples, n_features)
    window : int
        Input length in samples (>= 1).
    horizon : int
        Target length in samples (>= 1).

    Returns
    -------
    inputs : ndarray, shape (n_traj * n_per, window, n_features)
    targets : ndarray, shape (n_traj * n_per, horizon, n_features)

    Raises
    ------
    UsageError
        If ``states`` is not 3-D or too short for ``window + horizon``.
    """
    array = np.asarray(states)
    span = window + horizon
    if array.ndim != 3 or window < 1 or horizon < 1 or array.shape[1] < span:
        raise UsageError(
            f"cannot cut windows of {window} + {horizon} samples from states of shape "
            f"{array.shape}: need (n_traj, n_samples >= window + horizon, n_features), "
            "window >= 1, horizon >= 1"
        )
    views = np.lib.stride_tricks.sliding_window_view(array, span, axis=1).swapaxes(2, 3)
    n_features = array.shape[2]
    inputs = views[:, :, :window].reshape(-1, window, n_features)
    targets = views[:, :, window:].reshape(-1, horizon, n_features)
    return inputs, targets


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``coursehub pendulum generate``."""
    parser.add_argument("--n-trajectories", type=int, default=1000, help="default: 1000")
    parser.add_argument("--seed", type=int, default=0, help="initial angles and split (0)")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_DATA_PATH,
        metavar="FILE",
        help=f"dataset file to write (default: {DEFAULT_DATA_PATH})",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing FILE")
    parser.add_argument("--duration", type=float, default=25.0, help="seconds (default: 25)")
    parser.add_argument("--dt", type=float, default=1 / 30, help="sample interval, s (1/30)")
    parser.add_argument("--substeps", type=int, default=8, help="RK4 steps per sample (8)")
    defaults = PendulumParams()
    for name, unit in (("m1", "kg"), ("m2", "kg"), ("l1", "m"), ("l2", "m"), ("g", "m/s^2")):
        default = getattr(defaults, name)
        parser.add_argument(
            f"--{name}", type=float, default=default, help=f"{unit} (default: {default})"
        )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """Validate every option, refuse to clobber without ``--force``, generate, save."""
    params = PendulumParams(m1=args.m1, m2=args.m2, l1=args.l1, l2=args.l2, g=args.g)
    n_steps = check_generation(
        args.n_trajectories, args.duration, args.dt, args.substeps, seed=args.seed
    )
    check_output(args.out, args.force, n_bytes=2 * args.n_trajectories * (n_steps + 1) * 32)
    ds = generate_dataset(
        args.n_trajectories,
        args.seed,
        params,
        args.duration,
        args.dt,
        args.substeps,
        progress=not args.no_progress,
    )
    save_dataset(ds, args.out, overwrite=args.force)
    counts = ", ".join(f"{k} {len(ds.indices(k))}" for k in SPLIT_CODES)
    print(
        f"wrote {args.out}: {ds.n_trajectories} trajectories x {ds.states.shape[1]} samples "
        f"({counts}, excluded {int((~ds.valid).sum())}); "
        f"max energy error {ds.energy_error.max():.2g}"
    )
    return 0


def check_output(out: Path, force: bool, n_bytes: int) -> None:
    """Refuse a folder, an existing file without ``force``, or data larger than free memory."""
    import psutil

    if out.is_dir():
        raise UsageError(
            f"--out {out} is a folder; give a file name such as {out / 'pendulum.npz'}"
        )
    if out.exists() and not force:
        raise UsageError(f"{out} already exists; pass --force to overwrite it")
    available = psutil.virtual_memory().available
    if n_bytes > available:
        raise UsageError(
            f"the dataset needs about {n_bytes / 2**30:.1f} GiB of memory but "
            f"{available / 2**30:.1f} GiB is available; "
            "use fewer trajectories or a shorter duration"
        )
