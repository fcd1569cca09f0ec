"""Pure plans of a build: its name, commands, hidden folders, kernel spec, builds to prune."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coursehub.courseenv.layout import env_paths

#: Packages every course environment gets: the kernel.
BASE_PACKAGES = ("ipykernel",)
#: Variables naming coursehub's other folders, hidden from the build when set.
HIDDEN_DIR_VARS = (
    "COURSEHUB_GRADING_COURSES",
    "COURSEHUB_GRADING_EXCHANGE",
    "COURSEHUB_BOOKS_DIR",
    "COURSEHUB_RUNS_DIR",
    "COURSEHUB_SLOTS_DIR",
)


def plan_stamp(now: datetime, taken: set[str]) -> str:
    """Return a new build name, ``YYYYmmddTHHMMSSZ`` (``-2``, ``-3``... if taken) (pure)."""
    base = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    stamp, n = base, 1
    while stamp in taken:
        n += 1
        stamp = f"{base}-{n}"
    return stamp


def plan_prune(builds: list[str], current: str | None, in_use: set[str]) -> list[str]:
    """Return the builds to remove (pure).

    Kept: ``current``, the newest other build (the previous one), and those in ``in_use``.
    """
    others = sorted(b for b in builds if b != current)
    keep = {current, *others[-1:], *in_use}
    return [b for b in others if b not in keep]


def render_kernel_spec(python: str, course_id: str) -> dict[str, Any]:
    """Return ``kernel.json`` of the course's kernel running ``python`` (pure).

    The fields of ipykernel's own spec (``ipykernel.kernelspec.get_kernel_dict``).
    """
    return {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({course_id})",
        "language": "python",
        "metadata": {"debugger": True, "coursehub_course": course_id},
    }


def plan_build_steps(python: str, build: Path, requirements: Path) -> list[list[str]]:
    """Return the commands of a build, all run in the sandbox (pure)."""
    return [
        [python, "-m", "venv", str(build)],
        [
            str(build / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--no-input",
            "--only-binary=:all:",
            "--progress-bar=off",
            "-r",
            str(requirements),
            *BASE_PACKAGES,
        ],
    ]


def plan_build_hidden(
    root: str | os.PathLike[str], course_id: str, build: Path, environ: Mapping[str, str]
) -> list[str]:
    """Return the folders a build must not see (sorted; missing ones included).

    Everything else of the shared root: every other course, this course's
    data, kernels, logs and other builds; then the catalog's folder
    (:func:`coursehub.settings.data_dir`), the material
    (:func:`coursehub.material.layout.material_root`: the credentials) and
    the folders named by :data:`HIDDEN_DIR_VARS`. Pure but for listing the
    course folders.
    """
    from coursehub.material.layout import material_root
    from coursehub.settings import data_dir

    paths = env_paths(root, course_id)
    courses = paths.home.parent.parent
    keep_chain = {courses, paths.home.parent, paths.home, paths.builds, build}
    folders: set[Path] = {data_dir(environ), material_root(environ)}
    for parent in (Path(root), courses, paths.home.parent, paths.home, paths.builds):
        with contextlib.suppress(OSError):
            folders |= {e for e in parent.iterdir() if e not in keep_chain and not e.is_symlink()}
    folders |= {Path(environ[name]) for name in HIDDEN_DIR_VARS if environ.get(name)}
    return sorted(str(folder) for folder in folders)
