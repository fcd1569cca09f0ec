"""Build a course's environment aside, then switch to it atomically; keep the old one on failure.

Layout (:mod:`coursehub.courselayout`), in ``<root>/courses/<course_id>/env``::

    requirements.txt        what the course declared (``coursehub env set``)
    material-requirements.txt   else: the ``requirements.txt`` of the course's material, checked
    builds/<stamp>/         one virtual environment per build
    current -> builds/<stamp>
    logs/<stamp>.log        the build's output (mode 0640: the team reads it on the course page)
    state.json              status, build, size, duration, error

and the kernel spec ``<root>/courses/<course_id>/kernels/share/jupyter/kernels/course-<course_id>``.

A build is ``python -m venv`` then ``pip install --only-binary=:all:`` (the
site's pip configuration, e.g. its index mirror, applies) and ipykernel. Why
pip and not uv: pip ships with every Python and reads the site's
``pip.conf`` (index, constraints); uv reads its own configuration. Only when
everything succeeded is ``kernel.json`` replaced (atomic rename) to run the new
build's Python, and ``current`` re-pointed (a new symlink renamed over the old
one, rename(2) being atomic). A kernel started before keeps running from its
own build's folder: the previous build is always kept, older ones are removed
only when no process of this host runs from them. A failed build is
removed, its log kept, and the previous environment and kernel stay as they
were.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from coursehub.atomicfile import write_atomically
from coursehub.courseenv.requirements import parse_requirements, render_requirements
from coursehub.courselayout import env_dir, kernel_name, kernels_prefix
from coursehub.errors import CoursehubError, UsageError

#: Seconds a build may take before it is stopped.
BUILD_TIMEOUT_S = 1800.0
#: Variables removed from the build's environment (they would redirect the new Python).
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PIP_USER")
#: Packages every course environment gets: the kernel.
BASE_PACKAGES = ("ipykernel",)
#: Mode of the build log: root writes, the course app (root) and admins read.
LOG_MODE = 0o640


class EnvBuildError(CoursehubError):
    """A build failed; the previous environment is kept. The message names the course and log."""


@dataclass(frozen=True)
class EnvPaths:
    """The files of one course's environment (see the module docstring)."""

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


def build_environment(
    root: str | os.PathLike[str],
    course_id: str,
    python: str = sys.executable,
    timeout_s: float = BUILD_TIMEOUT_S,
    now: datetime | None = None,
    material: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Build ``course_id``'s environment aside and switch to it; return the new state.

    The requirements are the course's declared list (``coursehub env set``),
    else ``material``: ``(text, where)`` of the ``requirements.txt`` of the
    course's material (:func:`coursehub.courseenv.requirements.material_requirements`),
    checked like a declared list.

    Raises
    ------
    UsageError
        If the course declared no requirements and ``material`` is None, if the
        material's lines are refused (named by ``where`` and line), or if
        another build of it is running.
    EnvBuildError
        If venv or pip failed or took longer than ``timeout_s``: the state
        says ``failed`` with the log's last line; the previous build, its
        ``current`` link and the kernel are untouched.
    """
    paths = env_paths(root, course_id)
    requirements, source = paths.requirements, "coursehub env set"
    if not requirements.is_file():
        if material is None:
            raise UsageError(
                f"course {course_id} declares no environment: run coursehub env set {course_id} "
                "--packages ... or --requirements FILE, or add a requirements.txt at the root "
                "of its material"
            )
        text, source = material
        lines = parse_requirements(text, source)  # nothing written on a refused line
        requirements = paths.material_requirements
        paths.home.mkdir(mode=0o755, parents=True, exist_ok=True)
        write_atomically(requirements, render_requirements(lines))
    for folder in (paths.builds, paths.logs, paths.kernel_dir):
        folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    with _build_lock(paths):
        started = now or datetime.now(UTC)
        stamp = plan_stamp(started, {p.name for p in paths.builds.iterdir()})
        build = paths.builds / stamp
        log_path = paths.logs / f"{stamp}.log"
        previous = read_state(paths)
        _write_state(paths, {**previous, "status": "building", "building": stamp})
        t0 = time.monotonic()
        try:
            _run_build(paths, requirements, build, log_path, python, timeout_s)
        except EnvBuildError as exc:
            shutil.rmtree(build, ignore_errors=True)
            state = {
                **{k: v for k, v in previous.items() if k in ("build", "size_bytes", "python")},
                "status": "failed",
                "error": str(exc),
                "log": log_path.name,
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            _write_state(paths, state)
            raise
        duration_s = time.monotonic() - t0
        python_in_build = str(build / "bin" / "python")
        spec = render_kernel_spec(python_in_build, course_id)
        write_atomically(paths.kernel_dir / "kernel.json", json.dumps(spec, indent=1) + "\n")
        link = paths.home / f".current-{stamp}"
        os.symlink(os.path.join("builds", stamp), link)
        os.replace(link, paths.current)
        state = {
            "status": "ok",
            "build": stamp,
            "python": python_in_build,
            "requirements": requirements.read_text(encoding="utf-8").splitlines(),
            "requirements_from": source,
            "size_bytes": disk_usage(build),
            "duration_s": round(duration_s, 1),
            "log": log_path.name,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        _write_state(paths, state)
        prune_builds(paths, stamp)
        return state


def _run_build(
    paths: EnvPaths,
    requirements: Path,
    build: Path,
    log_path: Path,
    python: str,
    timeout_s: float,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    steps = [
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
        [str(build / "bin" / "python"), "-m", "pip", "freeze", "--all"],
    ]
    deadline = time.monotonic() + timeout_s
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, LOG_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as log:
        for argv in steps:
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            try:
                result = subprocess.run(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    timeout=max(1.0, deadline - time.monotonic()),
                    check=False,
                )
            except subprocess.TimeoutExpired:
                log.write(f"\nstopped after {timeout_s:g} s\n")
                raise EnvBuildError(
                    f"course {paths.course_id}: the build took more than {timeout_s:g} s "
                    f"(log {log_path})"
                ) from None
            if result.returncode != 0:
                log.flush()
                raise EnvBuildError(
                    f"course {paths.course_id}: {Path(argv[0]).name} {' '.join(argv[1:4])} "
                    f"failed: {_last_line(log_path)} (log {log_path})"
                )


def _last_line(path: Path) -> str:
    lines = [
        line.strip()
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    ]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:300]


def _write_state(paths: EnvPaths, state: Mapping[str, Any]) -> None:
    write_atomically(paths.state, json.dumps(dict(state), indent=1) + "\n")


@contextlib.contextmanager
def _build_lock(paths: EnvPaths) -> Iterator[None]:
    with open(paths.home / ".build.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"a build of course {paths.course_id} is already running") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def disk_usage(path: Path) -> int:
    """Return the bytes ``path`` takes on disk (allocated blocks, as ``du``; links not followed)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def builds_in_use(builds: Path) -> set[str]:
    """Return the builds that a process of this host runs from (its executable or arguments)."""
    prefix = str(builds) + os.sep
    used: set[str] = set()
    for proc in psutil.process_iter(["cmdline"]):
        for arg in proc.info.get("cmdline") or ():
            if arg.startswith(prefix):
                used.add(arg[len(prefix) :].split(os.sep, 1)[0])
    return used


def prune_builds(paths: EnvPaths, current: str) -> list[str]:
    """Remove old builds (see :func:`plan_prune`); return their names."""
    names = [p.name for p in paths.builds.iterdir() if p.is_dir()]
    removed = plan_prune(names, current, builds_in_use(paths.builds))
    for name in removed:
        shutil.rmtree(paths.builds / name, ignore_errors=True)
    return removed
