"""GPU assignments of a hub's running servers, kept in a JSON file across hub restarts.

Used by :class:`coursehub.spawn.spawner.CourseProfiles` (``local`` and
``systemd`` spawners): each server gets the least-loaded GPUs that still have
room (:func:`coursehub.spawn.profiles.plan_gpu_assignment`). The file is
updated under an exclusive ``flock`` and replaced atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.spawn.profiles import plan_gpu_assignment


class GpuAssignments:
    """GPU assignments of running servers, kept in a JSON file: ``{server_key: [gpu, ...]}``.

    Parameters
    ----------
    path
        The JSON file; its directory must exist. A ``.lock`` file next to it
        serialises updates across processes (``fcntl.flock``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, list[int]]]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self.read()
                before = dict(state)
                yield state
                if state != before:
                    self._write(state)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def read(self) -> dict[str, list[int]]:
        """Return the assignments (empty when the file does not exist yet)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise UsageError(f"GPU state file {self.path} is unreadable: {exc}") from exc
        return {str(k): [int(i) for i in v] for k, v in data.get("assignments", {}).items()}

    def _write(self, state: Mapping[str, list[int]]) -> None:
        document = {"assignments": dict(sorted(state.items()))}
        write_atomically(self.path, json.dumps(document, indent=1), mode=0o600)

    def loads(self) -> dict[int, int]:
        """Return GPU index -> number of servers assigned to it."""
        counts: dict[int, int] = {}
        for ids in self.read().values():
            for index in ids:
                counts[index] = counts.get(index, 0) + 1
        return counts

    def assign(self, key: str, gpu_ids: Sequence[int], n_gpus: int, jobs_per_gpu: int) -> list[int]:
        """Return the GPUs of server ``key``: its current ones if still valid, else new ones.

        Raises
        ------
        UsageError
            If not enough GPUs have room (see :func:`plan_gpu_assignment`).
        """
        with self._locked() as state:
            current = state.pop(key, [])
            if len(current) == n_gpus and set(current) <= set(gpu_ids):
                state[key] = current
                return current
            loads: dict[int, int] = {}
            for ids in state.values():
                for index in ids:
                    loads[index] = loads.get(index, 0) + 1
            chosen = plan_gpu_assignment(loads, gpu_ids, n_gpus, jobs_per_gpu)
            if chosen:
                state[key] = chosen
            return chosen

    def release(self, key: str) -> None:
        """Forget the GPUs of server ``key`` (nothing happens if it had none)."""
        if not self.path.exists():
            return
        with self._locked() as state:
            state.pop(key, None)
