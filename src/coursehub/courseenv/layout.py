"""The files of one course's environment: requirements, builds, logs, state (see :mod:`.build`).

Read by the course page and ``coursehub env show``; written only by a build.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.courselayout import env_dir, kernel_name, kernels_prefix


@dataclass(frozen=True)
class EnvPaths:
    """The files of one course's environment (see :mod:`coursehub.courseenv.build`)."""

    course_id: str
    home: Path
    kernels: Path

    @property
    def requirements(self) -> Path:
        return self.home / "requirements.txt"

    @property
    def material_requirements(self) -> Path:
        """The checked copy of the material's ``requirements.txt`` last built from."""
        return self.home / "material-requirements.txt"

    @property
    def builds(self) -> Path:
        return self.home / "builds"

    @property
    def current(self) -> Path:
        return self.home / "current"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def state(self) -> Path:
        return self.home / "state.json"

    @property
    def kernel_dir(self) -> Path:
        return self.kernels / "share" / "jupyter" / "kernels" / kernel_name(self.course_id)


def env_paths(root: str | os.PathLike[str], course_id: str) -> EnvPaths:
    """Return the paths of ``course_id``'s environment under ``root``."""
    return EnvPaths(course_id, env_dir(root, course_id), kernels_prefix(root, course_id))


def read_state(paths: EnvPaths) -> dict[str, Any]:
    """Return the environment's state (``{"status": "none"}`` before any build)."""
    try:
        state: dict[str, Any] = json.loads(paths.state.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"status": "none"}
    except (OSError, ValueError) as exc:
        return {"status": "unknown", "error": f"{paths.state} is unreadable: {exc}"}
    return state


def read_log_tail(paths: EnvPaths, log: str | None, n_chars: int = 20000) -> str:
    """Return the end of the build log ``log`` (a name from the state), or "" if none."""
    if not log or "/" in log:
        return ""
    try:
        text = (paths.logs / log).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-n_chars:]


def write_state(paths: EnvPaths, state: Mapping[str, Any]) -> None:
    """Replace the environment's ``state.json`` with ``state`` (atomic rename)."""
    write_atomically(paths.state, json.dumps(dict(state), indent=1) + "\n")
