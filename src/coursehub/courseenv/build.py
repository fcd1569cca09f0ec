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
   (:func:`read_pip_config`, :func:`plan_pip_env`: none holding a
   credential), and the network is kept only when an index is remote
   (:func:`plan_needs_network`);
2. root then seals the build (:func:`seal_build`): every file becomes
   root's, with no write bit for group or others and no set-id bit; a
   special file or a hard link fails the build;
3. the installed packages are read from the ``*.dist-info`` files
   (:func:`installed_packages`, ``importlib.metadata`` on the build's
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
were.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import importlib.metadata
import json
import os
import re
import secrets
import shutil
import signal
import stat
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
from coursehub.sandbox.command import SandboxPlan, chown_tree, plan_sandbox_command
from coursehub.sandbox.env import is_secret_name, plan_sandbox_env

#: Seconds a build may take before it is stopped.
BUILD_TIMEOUT_S = 1800.0
#: Variables removed from the build's environment (they would redirect the new Python).
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PIP_USER")
#: Packages every course environment gets: the kernel.
BASE_PACKAGES = ("ipykernel",)
#: Mode of the build log: root writes, the course app (root) and admins read.
LOG_MODE = 0o640
#: Mode of ``builds/``: every account enters a build by its name, none lists them, so a
#: sandboxed job of another course cannot find a build while the sandbox account owns it.
BUILDS_MODE = 0o711
#: pip settings never passed to the build: they would install elsewhere than the build,
#: read other configuration files, or share a cache the sandbox account could write.
DROPPED_PIP_SETTINGS = frozenset(
    {"user", "target", "prefix", "root", "src", "config-file", "cache-dir", "isolated"}
)
#: pip settings naming a secret, whatever their name says (a client key file).
CREDENTIAL_PIP_SETTINGS = frozenset({"client-cert"})
#: A URL holding a user name or password (``scheme://user:password@host``).
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s]+@", re.IGNORECASE)
#: pip's default index, used unless ``index-url`` or ``no-index`` says otherwise.
DEFAULT_INDEX_URL = "https://pypi.org/simple"
#: Sections of ``pip config list`` that apply to ``pip install``, weakest first.
PIP_SECTIONS = ("global", "install", ":env:")
#: Deepest folder a build may hold (a venv has fewer than 20 levels).
MAX_BUILD_DEPTH = 100
#: Variables naming coursehub's other folders, hidden from the build when set.
HIDDEN_DIR_VARS = (
    "COURSEHUB_GRADING_COURSES",
    "COURSEHUB_GRADING_EXCHANGE",
    "COURSEHUB_BOOKS_DIR",
    "COURSEHUB_RUNS_DIR",
    "COURSEHUB_SLOTS_DIR",
)


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


def parse_pip_config(text: str) -> dict[str, str]:
    """Return the settings of ``pip config list`` output that apply to ``pip install`` (pure).

    Lines are ``section.key='value'``; of the sections :data:`PIP_SECTIONS`, a
    later one wins (``PIP_*`` variables over ``install`` over ``global``, as
    pip itself reads them). Other sections and malformed lines are skipped.
    """
    ranked: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition("=")
        section, dot, key = name.partition(".")
        if not sep or not dot or section not in PIP_SECTIONS or not key:
            continue
        try:
            value = ast.literal_eval(raw) if raw[:1] in ("'", '"') else raw
        except (ValueError, SyntaxError):
            continue
        rank = PIP_SECTIONS.index(section)
        if key not in ranked or ranked[key][0] <= rank:
            ranked[key] = (rank, str(value))
    return {key: value for key, (_rank, value) in ranked.items()}


def read_pip_config(python: str) -> dict[str, str]:
    """Return the site's pip settings as root's pip sees them (:func:`parse_pip_config`).

    Runs ``python -m pip config list``: the trusted interpreter the build
    starts from, never the new one. Root's own ``~/.config/pip/pip.conf``
    counts, although the sandbox account cannot read it: the settings reach
    the build as ``PIP_*`` variables (:func:`plan_pip_env`).

    Raises
    ------
    EnvBuildError
        If pip cannot list its configuration.
    """
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    done = subprocess.run(
        [python, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvBuildError(f"cannot read the site's pip configuration: {last}")
    return parse_pip_config(done.stdout)


def _is_true(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on", "y", "t")


def pip_locations(config: Mapping[str, str]) -> list[str]:
    """Return every index and find-links location pip would read with ``config`` (pure)."""
    locations = config.get("find-links", "").split()
    if not _is_true(config.get("no-index", "0")):
        locations += config.get("index-url", DEFAULT_INDEX_URL).split()
        locations += config.get("extra-index-url", "").split()
    return locations


def _is_local(location: str) -> bool:
    return location.startswith("file:") or "://" not in location


def plan_needs_network(config: Mapping[str, str]) -> bool:
    """Return True if pip, set up by ``config``, reads an index or link that is not local (pure).

    Local: a path or a ``file:`` URL. Without ``index-url`` (and without
    ``no-index``) pip reads :data:`DEFAULT_INDEX_URL`.
    """
    return not all(_is_local(location) for location in pip_locations(config))


def local_pip_folders(config: Mapping[str, str]) -> list[str]:
    """Return the local folders of :func:`pip_locations` (the build must read them) (pure)."""
    folders = []
    for location in pip_locations(config):
        if _is_local(location):
            path = location.removeprefix("file://").removeprefix("file:")
            if path.startswith("/"):
                folders.append(path)
    return sorted(set(folders))


def plan_pip_env(
    environ: Mapping[str, str], config: Mapping[str, str], home: str
) -> dict[str, str]:
    """Return the environment of the build's sandboxed venv and pip (pure).

    The sandbox's allow-list (:func:`coursehub.sandbox.env.plan_sandbox_env`)
    of ``environ`` without :data:`DROPPED_ENV`, ``HOME`` and ``TMPDIR`` in the
    job's own ``home``, and each setting of ``config`` as its ``PIP_*``
    variable (less :data:`DROPPED_PIP_SETTINGS`), with ``PIP_CONFIG_FILE``
    set to ``os.devnull`` so that pip reads no file besides.

    Raises
    ------
    CoursehubError
        If a setting holds a credential (a URL with a user name or password,
        a client key, a name such as ``password``): the sandbox gets none.
    """
    env = {k: v for k, v in plan_sandbox_env(environ).items() if k not in DROPPED_ENV}
    for key in sorted(config):
        value = config[key]
        if key in CREDENTIAL_PIP_SETTINGS or is_secret_name(key) or _URL_USERINFO.search(value):
            raise CoursehubError(
                f"the site's pip setting {key} holds a credential, and the build's sandbox "
                "gets none: use an index that needs no credential (e.g. a local mirror)"
            )
        if key not in DROPPED_PIP_SETTINGS:
            env["PIP_" + key.upper().replace("-", "_")] = value
    env.update({"PIP_CONFIG_FILE": os.devnull, "HOME": home, "TMPDIR": f"{home}/tmp"})
    return env


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


def interpreter_links(build: Path) -> dict[str, str | None]:
    """Return ``bin/python*`` of ``build``: name -> link target, or None for a file that is no link.

    Read with ``lstat``/``readlink`` only: nothing of the build is followed or run.
    """
    links: dict[str, str | None] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in (build / "bin").iterdir():
            if entry.name.startswith("python"):
                links[entry.name] = os.readlink(entry) if entry.is_symlink() else None
    return links


def plan_interpreter_change(
    before: Mapping[str, str | None], after: Mapping[str, str | None]
) -> list[str]:
    """Return the ``bin/python*`` names a package install added, removed or changed (pure).

    ``python -m venv`` makes them links to the base interpreter; a wheel's
    ``.data/scripts/python`` would replace one with its own script, and every
    kernel of the course would then run that instead of Python.

    >>> plan_interpreter_change({"python": "/usr/bin/python3"}, {"python": None})
    ['python']
    """
    return sorted(n for n in {*before, *after} if before.get(n, "") != after.get(n, ""))


def plan_build_hidden(
    root: str | os.PathLike[str], course_id: str, build: Path, environ: Mapping[str, str]
) -> list[str]:
    """Return the folders a build must not see (sorted; missing ones included).

    Everything else of the shared root: every other course, this course's
    data, kernels, logs and other builds; then the catalog's folder
    (:func:`coursehub.catalog.db.data_dir`), the material
    (:func:`coursehub.material.layout.material_root`: the credentials) and
    the folders named by :data:`HIDDEN_DIR_VARS`. Pure but for listing the
    course folders.
    """
    from coursehub.catalog.db import data_dir
    from coursehub.material.layout import material_root

    paths = env_paths(root, course_id)
    courses = paths.home.parent.parent
    keep_chain = {courses, paths.home.parent, paths.home, paths.builds, build}
    folders: set[Path] = {data_dir(environ), material_root(environ)}
    for parent in (Path(root), courses, paths.home.parent, paths.home, paths.builds):
        with contextlib.suppress(OSError):
            folders |= {e for e in parent.iterdir() if e not in keep_chain and not e.is_symlink()}
    folders |= {Path(environ[name]) for name in HIDDEN_DIR_VARS if environ.get(name)}
    return sorted(str(folder) for folder in folders)


def installed_packages(build: Path) -> list[str]:
    """Return ``name==version`` of every package in the build, sorted (case-insensitive).

    Read from the ``*.dist-info/METADATA`` files of the build's
    ``site-packages`` (``importlib.metadata``) by this process: the new
    interpreter is never started, so no ``.pth`` file of the build runs.
    A ``site-packages`` outside the build (through a link), a ``dist-info``
    folder or ``METADATA`` that is a symbolic link is skipped.
    """
    found = set()
    inside = build.resolve()
    for site in sorted(build.glob("lib/python*/site-packages")):
        if site.is_symlink() or not site.resolve().is_relative_to(inside):
            continue  # a link out of the build (lib -> /root/...): never read as root
        for info in site.glob("*.dist-info"):
            metadata = info / "METADATA"
            if info.is_symlink() or metadata.is_symlink() or not metadata.is_file():
                continue
            dist = importlib.metadata.PathDistribution(info)
            name, version = dist.metadata["Name"], dist.metadata["Version"]
            if name and version:
                found.add(f"{name}=={version}")
    return sorted(found, key=str.lower)


def _sealed_mode(mode: int) -> int:
    """Return ``mode`` without write bits for group and others and without set-id bits."""
    return stat.S_IMODE(mode) & 0o755


def seal_build(build: Path) -> None:
    """Make every file of ``build`` root's (as root) and read-only for group and others.

    Walks with file descriptors (``O_NOFOLLOW``, ``dir_fd``), so that a link
    swapped in during the walk is never followed: symbolic links are kept
    (their owner changed), folders and regular files get
    :func:`_sealed_mode`.

    Raises
    ------
    EnvBuildError
        If the build holds a special file (FIFO, socket, device), a regular
        file with another name elsewhere (a hard link), or folders deeper
        than :data:`MAX_BUILD_DEPTH`.
    """
    owner = 0 if os.geteuid() == 0 else -1
    fd = os.open(build, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _seal_folder(fd, build, owner, 0)
    finally:
        os.close(fd)


def _seal_folder(fd: int, where: Path, owner: int, depth: int) -> None:
    if depth > MAX_BUILD_DEPTH:
        raise EnvBuildError(f"the build holds folders deeper than {MAX_BUILD_DEPTH}: {where}")
    os.fchown(fd, owner, owner)
    os.fchmod(fd, _sealed_mode(os.fstat(fd).st_mode))
    for name in os.listdir(fd):
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            os.chown(name, owner, owner, dir_fd=fd, follow_symlinks=False)
            continue
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        if stat.S_ISDIR(info.st_mode):
            sub = os.open(name, flags | os.O_DIRECTORY, dir_fd=fd)
            try:
                _seal_folder(sub, where / name, owner, depth + 1)
            finally:
                os.close(sub)
            continue
        if not stat.S_ISREG(info.st_mode):
            raise EnvBuildError(f"the build holds a special file: {where / name}")
        sub = os.open(name, flags, dir_fd=fd)
        try:
            opened = os.fstat(sub)
            if not stat.S_ISREG(opened.st_mode) or opened.st_nlink > 1:
                raise EnvBuildError(f"the build holds a hard link or special file: {where / name}")
            os.fchown(sub, owner, owner)
            os.fchmod(sub, _sealed_mode(opened.st_mode))
        finally:
            os.close(sub)


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
    os.chmod(paths.builds, BUILDS_MODE)
    with _build_lock(paths):
        started = now or datetime.now(UTC)
        taken = {p.stem for p in paths.logs.iterdir()} | {p.name for p in paths.builds.iterdir()}
        stamp = plan_stamp(started, taken)
        name = f"{stamp}-{secrets.token_hex(6)}"  # unguessable while the sandbox owns it
        build = paths.builds / name
        log_path = paths.logs / f"{stamp}.log"
        previous = read_state(paths)
        _write_state(paths, {**previous, "status": "building", "building": stamp})
        t0 = time.monotonic()
        try:
            packages = _run_build(
                paths, Path(root), requirements, build, log_path, python, timeout_s
            )
        except (CoursehubError, OSError) as exc:  # venv, pip, sandbox, pip settings, seal
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
            _write_state(paths, state)
            if error is exc:
                raise
            raise error from exc
        duration_s = time.monotonic() - t0
        python_in_build = str(build / "bin" / "python")
        spec = render_kernel_spec(python_in_build, course_id)
        write_atomically(paths.kernel_dir / "kernel.json", json.dumps(spec, indent=1) + "\n")
        link = paths.home / f".current-{stamp}"
        os.symlink(os.path.join("builds", name), link)
        os.replace(link, paths.current)
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
        _write_state(paths, state)
        prune_builds(paths, name)
        return state


def _run_build(
    paths: EnvPaths,
    root: Path,
    requirements: Path,
    build: Path,
    log_path: Path,
    python: str,
    timeout_s: float,
) -> list[str]:
    """Run venv and pip in the sandbox, seal the build, return its packages (see the module)."""
    from coursehub.sandbox.plan import interpreter_paths, make_plan
    from coursehub.sandbox.preflight import check_plan, describe_blocking
    from coursehub.sandbox.workdir import make_job_dir

    deadline = time.monotonic() + timeout_s
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, LOG_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as log:
        config = read_pip_config(python)
        job = make_job_dir()
        try:
            home, stage = job / "home", job / "stage"
            for folder in (home / "tmp", stage):
                folder.mkdir(parents=True)
            job_requirements = job / "requirements.txt"
            shutil.copyfile(requirements, job_requirements)
            build.mkdir(mode=0o755)
            python_home = Path(python).resolve().parent.parent
            plan = make_plan(
                plan_build_hidden(root, paths.course_id, build, os.environ),
                keep=[job, build],
                needed=[*interpreter_paths(), str(python_home), *local_pip_folders(config)],
                network=plan_needs_network(config),
                stage_dir=stage,
            )
            env = plan_pip_env(os.environ, config, home=str(home))
            if plan.account is not None:
                env["USER"] = env["LOGNAME"] = plan.account.name
                blocked = describe_blocking(build, plan)
                if blocked:
                    raise EnvBuildError(
                        f"course {paths.course_id}: {blocked}, so it cannot build the "
                        "environment: every folder above the shared root must be open "
                        "(mode 0755)"
                    )
                chown_tree(job, plan.account.uid, plan.account.gid)
                os.chown(build, plan.account.uid, plan.account.gid)
            try:
                check_plan(plan, python=python, code="import venv, ensurepip")
            except CoursehubError as exc:
                raise EnvBuildError(f"course {paths.course_id}: {exc}") from None
            account = plan.account.name if plan.account else "this account"
            log.write(
                f"# sandbox: {plan.mode} mode, as {account}, "
                f"network {'kept' if plan.network else 'off'}\n"
            )
            links: dict[str, str | None] = {}
            for step, argv in enumerate(plan_build_steps(python, build, job_requirements)):
                _run_step(paths, argv, plan, env, str(home), log, log_path, deadline, timeout_s)
                if step == 0:  # the interpreter as venv made it
                    links = interpreter_links(build)
            changed = plan_interpreter_change(links, interpreter_links(build))
            if changed:
                raise EnvBuildError(
                    f"course {paths.course_id}: a requirement replaced the environment's "
                    f"interpreter ({', '.join('bin/' + n for n in changed)}); remove that "
                    f"package from the requirements (log {log_path})"
                )
        finally:
            shutil.rmtree(job, ignore_errors=True)
        seal_build(build)
        packages = installed_packages(build)
        log.write("# installed (read from the dist-info files):\n")
        log.write("".join(f"{package}\n" for package in packages))
    return packages


def _run_step(
    paths: EnvPaths,
    argv: list[str],
    plan: SandboxPlan,
    env: Mapping[str, str],
    cwd: str,
    log: Any,
    log_path: Path,
    deadline: float,
    timeout_s: float,
) -> None:
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    # its own session: whatever the step leaves behind is killed with it (uid and none modes)
    proc = subprocess.Popen(
        plan_sandbox_command(argv, plan),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        log.write(f"\nstopped after {timeout_s:g} s\n")
        raise EnvBuildError(
            f"course {paths.course_id}: the build took more than {timeout_s:g} s (log {log_path})"
        ) from None
    _kill_session(proc)
    if returncode != 0:
        log.flush()
        raise EnvBuildError(
            f"course {paths.course_id}: {Path(argv[0]).name} {' '.join(argv[1:4])} "
            f"failed: {_last_line(log_path)} (log {log_path})"
        )


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


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
