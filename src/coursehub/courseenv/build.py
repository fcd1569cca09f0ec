"""Build a course's environment aside, then switch to it atomically; keep the old one on failure.

Layout (:mod:`coursehub.courselayout`), in ``<root>/courses/<course_id>/env``::

    requirements.txt        what the course declared (``coursehub env set``)
    material-requirements.txt   else: the ``requirements.txt`` of the course's material, checked
    builds/                 mode 0711: builds are entered by their name, never listed
    builds/<stamp>-<random>/   one virtual environment per build (root's, read-only for others)
    current -> builds/<stamp>-<random>
    logs/<stamp>.log        the build's output (mode 0640: the team reads it on the course page)
    state.json              status, build, packages, size, duration, error

and the kernel spec ``<root>/courses/<course_id>/kernels/share/jupyter/kernels/course-<course_id>``.

A build is ``python -m venv`` then ``pip install --only-binary=:all:`` (the
site's pip configuration, e.g. its index mirror, applies) and ipykernel. Why
pip and not uv: pip ships with every Python and reads the site's
``pip.conf`` (index, constraints); uv reads its own configuration.

No code of an installed package runs in coursehub's own (root) process: a
wheel may carry a ``<name>.pth`` whose ``import`` lines Python's ``site``
module runs at every start of the new interpreter. So

1. venv and pip run in the sandbox (:mod:`coursehub.sandbox`): as root, as
   the sandbox account, which owns only the build folder and its private
   job folder; the other courses, this course's other builds and logs, the
   catalog and the material (its credentials) are hidden; the environment
   is the sandbox's allow-list plus the site's pip settings as seen by root
   (:mod:`coursehub.courseenv.pipconfig`: none holding a credential), and
   the network is kept only when an index is remote
   (:func:`~coursehub.courseenv.pipconfig.plan_needs_network`); the steps
   run in :mod:`coursehub.courseenv.sandboxjob`;
2. root then seals the build (:func:`~coursehub.courseenv.seal.seal_build`): every file becomes
   root's, with no write bit for group or others and no set-id bit; a
   special file or a hard link fails the build;
3. the installed packages are read from the ``*.dist-info`` files
   (:func:`~coursehub.courseenv.seal.installed_packages`, ``importlib.metadata`` on the build's
   ``site-packages``), never by starting the new interpreter;
4. only then is ``kernel.json`` replaced (atomic rename) to run the new
   build's Python, and ``current`` re-pointed (a new symlink renamed over
   the old one, rename(2) being atomic).

Not root, the same sandbox runs venv and pip as the user (inside a user
namespace where the host allows one), and steps 2-4 are the same but for
the change of owner. A kernel started before keeps running from its own
build's folder: the previous build is always kept, older ones are removed
only when no process of this host runs from them. A failed build is
removed, its log kept, and the previous environment and kernel stay as they
were. The files are named in :mod:`coursehub.courseenv.layout`, the pure
plans (build name, commands, hidden folders, kernel spec, pruning) are in
:mod:`coursehub.courseenv.plan`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from coursehub.atomicfile import write_atomically
from coursehub.courseenv.errors import EnvBuildError
from coursehub.courseenv.layout import EnvPaths, env_paths, read_state, write_state
from coursehub.courseenv.plan import plan_prune, plan_stamp, render_kernel_spec
from coursehub.courseenv.requirements import parse_requirements, render_requirements
from coursehub.courseenv.sandboxjob import run_build
from coursehub.errors import CoursehubError, UsageError

#: Seconds a build may take before it is stopped.
BUILD_TIMEOUT_S = 1800.0
#: Mode of ``builds/``: every account enters a build by its name, none lists them, so a
#: sandboxed job of another course cannot find a build while the sandbox account owns it.
BUILDS_MODE = 0o711


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
    requirements, source = _requirements_to_build(paths, material)
    for folder in (paths.builds, paths.logs, paths.kernel_dir):
        folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(paths.builds, BUILDS_MODE)
    with _build_lock(paths):
        started = now or datetime.now(UTC)
        taken = {p.stem for p in paths.logs.iterdir()} | {p.name for p in paths.builds.iterdir()}
        stamp = plan_stamp(started, taken)
        name = f"{stamp}-{secrets.token_hex(6)}"  # unguessable while the sandbox owns it
        build = paths.builds / name
        log_path = paths.logs / f"{stamp}.log"
        previous = read_state(paths)
        write_state(paths, {**previous, "status": "building", "building": stamp})
        t0 = time.monotonic()
        try:
            packages = run_build(
                paths, Path(root), requirements, build, log_path, python, timeout_s
            )
        except (CoursehubError, OSError) as exc:  # venv, pip, sandbox, pip settings, seal
            error = _record_failure(paths, previous, build, log_path, exc)
            if error is exc:
                raise
            raise error from exc
        duration_s = time.monotonic() - t0
        python_in_build = _switch_to_build(paths, build, stamp)
        state = {
            "status": "ok",
            "build": name,
            "python": python_in_build,
            "requirements": requirements.read_text(encoding="utf-8").splitlines(),
            "requirements_from": source,
            "packages": packages,
            "size_bytes": disk_usage(build),
            "duration_s": round(duration_s, 1),
            "log": log_path.name,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        write_state(paths, state)
        prune_builds(paths, name)
        return state


def _requirements_to_build(paths: EnvPaths, material: tuple[str, str] | None) -> tuple[Path, str]:
    """Return the requirements file to build from and who declared it.

    The course's declared list, else ``material``'s lines, checked and written
    to ``material-requirements.txt``.

    Raises
    ------
    UsageError
        If the course declared none and ``material`` is None, or if a line of
        the material is refused (nothing is written then).
    """
    if paths.requirements.is_file():
        return paths.requirements, "coursehub env set"
    if material is None:
        raise UsageError(
            f"course {paths.course_id} declares no environment: run coursehub env set "
            f"{paths.course_id} --packages ... or --requirements FILE, or add a "
            "requirements.txt at the root of its material"
        )
    text, source = material
    lines = parse_requirements(text, source)  # nothing written on a refused line
    paths.home.mkdir(mode=0o755, parents=True, exist_ok=True)
    write_atomically(paths.material_requirements, render_requirements(lines))
    return paths.material_requirements, source


def _record_failure(
    paths: EnvPaths,
    previous: dict[str, Any],
    build: Path,
    log_path: Path,
    exc: CoursehubError | OSError,
) -> CoursehubError | OSError:
    """Remove the failed ``build``, write the ``failed`` state; return the error to raise.

    That is ``exc`` itself when it already names the course, else an
    :class:`EnvBuildError` naming the course and the log.
    """
    course_id = paths.course_id
    shutil.rmtree(build, ignore_errors=True)
    named = isinstance(exc, EnvBuildError) and str(exc).startswith(f"course {course_id}:")
    error = exc if named else EnvBuildError(f"course {course_id}: {exc} (log {log_path})")
    state = {
        **{k: v for k, v in previous.items() if k in ("build", "size_bytes", "python")},
        "status": "failed",
        "error": str(error),
        "log": log_path.name,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_state(paths, state)
    return error


def _switch_to_build(paths: EnvPaths, build: Path, stamp: str) -> str:
    """Point the course's kernel, then ``current``, at ``build``; return its Python's path.

    ``kernel.json`` is replaced by an atomic rename, ``current`` by a new
    symlink renamed over the old one.
    """
    python_in_build = str(build / "bin" / "python")
    spec = render_kernel_spec(python_in_build, paths.course_id)
    write_atomically(paths.kernel_dir / "kernel.json", json.dumps(spec, indent=1) + "\n")
    link = paths.home / f".current-{stamp}"
    os.symlink(os.path.join("builds", build.name), link)
    os.replace(link, paths.current)
    return python_in_build


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
