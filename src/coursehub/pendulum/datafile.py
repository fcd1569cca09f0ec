"""The pendulum dataset record and its self-describing ``.npz`` file format.

A file holds the arrays ``states`` (n_traj, n_samples, 4) float64,
``energy_error`` (n_traj,), ``energy_norm`` (n_traj,), ``valid`` (n_traj,)
bool and ``split`` (n_traj,) int8, plus ``metadata``: a JSON string with the
format name and version, the pendulum parameters, ``dt``, duration,
integrator, sub-steps, seed, energy tolerance, split codes and counts, and a
description of every array. Nothing is pickled. Files are written atomically
and validated on reading; every problem a user can meet is a
:class:`~coursehub.errors.UsageError` naming the file. Numpy only.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from coursehub import __version__
from coursehub.atomicfile import atomic_path
from coursehub.errors import UsageError
from coursehub.pendulum.physics import PendulumParams

FORMAT_NAME = "coursehub.pendulum.dataset"
FORMAT_VERSION = 1
# Largest accepted max |E(t) - E(0)| / (e_top - e_min) over a trajectory.
ENERGY_TOLERANCE = 1e-5
SPLIT_CODES = {"train": 0, "val": 1, "test": 2}
EXCLUDED = -1
ARRAY_FIELDS: dict[str, str] = {
    "states": "(n_traj, n_samples, 4) float64 [theta1 rad, omega1 rad/s, theta2 rad, omega2 rad/s]",
    "energy_error": "(n_traj,) float64 max |E(t) - E(0)| / (e_top - e_min)",
    "energy_norm": "(n_traj,) float64 (E(0) - e_min) / (e_top - e_min)",
    "valid": f"(n_traj,) bool energy_error <= {ENERGY_TOLERANCE}",
    "split": "(n_traj,) int8 0 = train, 1 = val, 2 = test, -1 = excluded (not valid)",
}


@dataclass(frozen=True, eq=False)
class PendulumDataset:
    """Simulated trajectories with their parameters, quality flags and split.

    Attributes
    ----------
    states : ndarray, shape (n_traj, n_samples, 4), float64
        ``[theta1, omega1, theta2, omega2]`` at ``t = 0, dt, 2 dt, ...``.
    dt : float
        Sample interval in s.
    params : PendulumParams
    seed : int
        Seed of the initial angles and of the split.
    integrator : str
        ``"rk4"`` (fixed step ``dt / substeps``).
    substeps : int
    energy_error : ndarray, shape (n_traj,)
        ``max_t |E(t) - E(0)| / (e_top - e_min)``.
    energy_norm : ndarray, shape (n_traj,)
        Normalised energy of the start (0 = rest down, 1 = rest upright).
    valid : ndarray, shape (n_traj,), bool
        ``energy_error <= ENERGY_TOLERANCE``.
    split : ndarray, shape (n_traj,), int8
        0 = train, 1 = val, 2 = test, -1 = excluded.
    format_version : int
    """

    states: NDArray[np.float64]
    dt: float
    params: PendulumParams
    seed: int
    integrator: str
    substeps: int
    energy_error: NDArray[np.float64]
    energy_norm: NDArray[np.float64]
    valid: NDArray[np.bool_]
    split: NDArray[np.int8]
    format_version: int = FORMAT_VERSION

    @property
    def n_trajectories(self) -> int:
        """Number of trajectories, valid or not."""
        return int(self.states.shape[0])

    @property
    def t(self) -> NDArray[np.float64]:
        """Sample times in s, shape (n_samples,)."""
        return np.arange(self.states.shape[1], dtype=np.float64) * np.float64(self.dt)

    def indices(self, name: str) -> NDArray[np.intp]:
        """Trajectory indices of the ``"train"``, ``"val"`` or ``"test"`` split (valid only).

        Raises
        ------
        UsageError
            If ``name`` is not one of the three split names.
        """
        if name not in SPLIT_CODES:
            raise UsageError(f"unknown split {name!r}: expected one of {', '.join(SPLIT_CODES)}")
        return np.flatnonzero(self.split == SPLIT_CODES[name])


def render_metadata(ds: PendulumDataset) -> str:
    """The JSON metadata entry of a dataset file (format, settings, field descriptions)."""
    counts = {name: int((ds.split == code).sum()) for name, code in SPLIT_CODES.items()}
    meta = {
        "format": FORMAT_NAME,
        "format_version": ds.format_version,
        "coursehub_version": __version__,
        "params": asdict(ds.params),
        "units": {"m1": "kg", "m2": "kg", "l1": "m", "l2": "m", "g": "m/s^2", "dt": "s"},
        "dt": ds.dt,
        "duration_s": ds.dt * (ds.states.shape[1] - 1),
        "n_trajectories": ds.n_trajectories,
        "n_samples": int(ds.states.shape[1]),
        "integrator": ds.integrator,
        "substeps": ds.substeps,
        "seed": ds.seed,
        "initial_conditions": "theta1, theta2 ~ U(-pi, pi), omega1 = omega2 = 0",
        "energy_tolerance": ENERGY_TOLERANCE,
        "n_excluded": int((~ds.valid).sum()),
        "split_counts": counts,
        "split_codes": {**SPLIT_CODES, "excluded": EXCLUDED},
        "arrays": ARRAY_FIELDS,
    }
    return json.dumps(meta, indent=1)


def save_dataset(
    ds: PendulumDataset, path: str | os.PathLike[str], overwrite: bool = False
) -> None:
    """Write ``ds`` to an ``.npz`` file atomically (temp file in the same folder, then rename).

    Parameters
    ----------
    ds : PendulumDataset
    path : path-like
        Destination; missing parent folders are created.
    overwrite : bool
        Replace an existing file (the CLI's ``--force``).

    Raises
    ------
    UsageError
        If ``path`` exists and ``overwrite`` is false, or it cannot be written.
    """
    path = Path(path)
    try:
        with atomic_path(path, mode=None, replace=overwrite) as tmp, open(tmp, "wb") as f:
            np.savez(f, metadata=np.array(render_metadata(ds)), **_arrays(ds))
    except FileExistsError:
        raise UsageError(f"{path} already exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UsageError(f"cannot write dataset {path}: {exc.strerror or exc}") from exc


def _arrays(ds: PendulumDataset) -> dict[str, Any]:
    return {name: np.asarray(getattr(ds, name)) for name in ARRAY_FIELDS}


def load_dataset(path: str | os.PathLike[str]) -> PendulumDataset:
    """Read and validate a dataset file written by :func:`save_dataset`.

    Raises
    ------
    UsageError
        If the file is missing, not an npz archive, not a coursehub pendulum
        dataset, truncated or corrupt, inconsistent, or written in a newer
        format version than this coursehub reads.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(
            f"dataset file {path} not found; create it with "
            f"`coursehub pendulum generate --out {path}`"
        )
    with path.open("rb") as f:
        head = f.read(4)
    if not zipfile.is_zipfile(path):
        if head.startswith(b"PK"):
            raise UsageError(f"dataset file {path} is truncated or corrupt; generate it again")
        raise UsageError(f"{path} is not a coursehub pendulum dataset (not an npz archive)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = parse_metadata(npz["metadata"] if "metadata" in npz.files else None, path)
            missing = [name for name in ARRAY_FIELDS if name not in npz.files]
            if missing:
                raise UsageError(f"dataset file {path} lacks array(s) {', '.join(missing)}")
            arrays = {name: npz[name] for name in ARRAY_FIELDS}
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:
        raise UsageError(
            f"dataset file {path} is truncated or corrupt ({exc}); generate it again"
        ) from exc
    except ValueError as exc:
        raise UsageError(f"dataset file {path} is not readable without pickle ({exc})") from exc
    return _build_dataset(meta, arrays, path)


def parse_metadata(raw: NDArray[Any] | None, path: Path) -> dict[str, Any]:
    """Decode and check the JSON metadata entry: format name and version.

    Raises
    ------
    UsageError
        If it is missing or not JSON, names another format, or has a newer version.
    """
    try:
        if raw is None or raw.dtype.kind != "U":
            raise ValueError("no metadata entry")
        meta = json.loads(str(raw[()]))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
            raise ValueError(f"format is not {FORMAT_NAME}")
    except ValueError as exc:
        raise UsageError(f"{path} is not a coursehub pendulum dataset ({exc})") from None
    version = meta.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise UsageError(f"dataset file {path} has an invalid format_version {version!r}")
    if version > FORMAT_VERSION:
        raise UsageError(
            f"dataset file {path} has format version {version}, newer than this coursehub "
            f"{__version__} reads (up to {FORMAT_VERSION}); upgrade coursehub or regenerate it"
        )
    return meta


def _build_dataset(
    meta: dict[str, Any], arrays: dict[str, NDArray[Any]], path: Path
) -> PendulumDataset:
    """Check the arrays against the metadata and build the dataset."""
    problems = _array_problems(meta, arrays)
    try:
        params = PendulumParams(**meta["params"])
        fields = {k: meta[k] for k in ("dt", "seed", "integrator", "substeps")}
    except (KeyError, TypeError, UsageError) as exc:
        problems.append(f"bad metadata ({exc})")
    if problems:
        raise UsageError(f"dataset file {path} is inconsistent: {'; '.join(problems)}")
    return PendulumDataset(
        states=arrays["states"],
        params=params,
        energy_error=arrays["energy_error"].astype(np.float64),
        energy_norm=arrays["energy_norm"].astype(np.float64),
        valid=arrays["valid"].astype(bool),
        split=arrays["split"].astype(np.int8),
        format_version=meta["format_version"],
        **fields,
    )


def _array_problems(meta: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> list[str]:
    """What is wrong with the arrays' shapes, dtypes and split codes (empty if nothing)."""
    states = arrays["states"]
    expected = (meta.get("n_trajectories"), meta.get("n_samples"), 4)
    if states.shape != expected or states.dtype != np.float64:
        return [f"states is {states.shape} {states.dtype}, expected {expected} float64"]
    n = states.shape[0]
    problems = [
        f"{name} has shape {array.shape}, expected ({n},)"
        for name, array in arrays.items()
        if name != "states" and array.shape != (n,)
    ]
    if arrays["valid"].dtype != np.bool_ or arrays["split"].dtype.kind != "i":
        problems.append("valid must be bool and split an integer array")
    if not problems and not np.array_equal(arrays["split"] == EXCLUDED, ~arrays["valid"]):
        problems.append("split and valid disagree")
    if not problems and not np.isin(arrays["split"], [EXCLUDED, *SPLIT_CODES.values()]).all():
        problems.append("split holds codes other than -1, 0, 1, 2")
    return problems
