"""One book build: a copy of the material, checks, a sandboxed runner job, an atomic switch.

:func:`build_book` holds the course's build lock, copies the book's source
(:func:`coursehub.books.source.book_source_dir`: the course's published
material at its head when it has one, else the host folder of its settings;
no link out of the book) into a new build folder, checks the Jupyter Book
configuration and table of contents, writes the configuration as built
(:func:`coursehub.books.bookconfig.plan_config`: the book's allow-listed
keys, the course's execution), runs ``jupyter-book build`` inside the
sandbox of :mod:`coursehub.sandbox` as a runner job on this host
(:class:`coursehub.runner.local.LocalBackend`: thread and memory limits, a
timeout; :func:`coursehub.books.sandboxjob.run_build_job`), and only then
points ``current`` at the new HTML (a symbolic link replaced by
``rename(2)``). A failure leaves ``current`` as it was: the last good book
stays served. Every step is recorded in the state file (atomic writes),
with the source used and the configuration keys left out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coursehub.books.bookconfig import CONFIG_FILE, plan_config, render_dropped
from coursehub.books.plan import plan_build_id, plan_prune
from coursehub.books.sandboxjob import log_line, plan_build_hidden, run_build_job
from coursehub.books.settings import (
    BookError,
    BookPaths,
    BookSettings,
    read_settings,
    read_state,
    write_state,
)
from coursehub.books.source import book_source_dir, check_book
from coursehub.errors import CoursehubError

#: The book's HTML inside a build's output folder (``jupyter-book build --path-output``).
HTML_SUBDIR = Path("out") / "_build" / "html"
#: State keys about the book served, carried over from one build to the next.
SERVED_KEYS = ("served_build", "served_commit", "served_source")


@dataclass(frozen=True)
class BuildOutcome:
    """How a build ended: ``ok``, its id, one line for the user, its log, the material's commit."""

    ok: bool
    build_id: str
    message: str
    log_path: Path | None
    commit: str = ""


def now_text() -> str:
    """The current UTC time as ``2026-12-01 10:15:00 UTC``."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@contextlib.contextmanager
def build_lock(paths: BookPaths) -> Iterator[None]:
    """Hold the course's build lock (``flock``); one build of a course at a time.

    Raises
    ------
    BookError
        If another build of the course holds it.
    """
    paths.dir.mkdir(parents=True, exist_ok=True)
    with open(paths.lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BookError(f"a build of {paths.course_id}'s book is already running") from None
        yield


def is_building(paths: BookPaths) -> bool:
    """True while a build of the course holds its lock."""
    if not paths.lock.exists():
        return False
    with open(paths.lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def course_kernel(course_id: str, shared_root: Path | None) -> tuple[str | None, dict[str, str]]:
    """The course's kernel name and the ``JUPYTER_PATH`` that finds it, if it has one."""
    from coursehub.courselayout import jupyter_data_dir, kernel_name

    if shared_root is None:
        return None, {}
    data = jupyter_data_dir(shared_root, course_id)
    name = kernel_name(course_id)
    if not (data / "kernels" / name / "kernel.json").is_file():
        return None, {}
    return name, {"JUPYTER_PATH": str(data)}


def build_book(
    paths: BookPaths,
    *,
    material_dir: Path | None = None,
    shared_root: Path | None = None,
    on_output: Callable[[str], None] | None = None,
) -> BuildOutcome:
    """Build the course's book and switch it in; the previous one stays served on failure.

    Parameters
    ----------
    paths : BookPaths
        The course's book folders.
    material_dir : Path, optional
        The material root (default ``COURSEHUB_MATERIAL_DIR``, see :mod:`coursehub.material`).
    shared_root : Path, optional
        The shared root holding the course's kernel (:mod:`coursehub.courselayout`).
    on_output : callable, optional
        Receives jupyter-book's output as it comes (the log keeps it anyway).

    Returns
    -------
    BuildOutcome
        Also recorded in the state file.

    Raises
    ------
    BookError
        If another build of the course runs (nothing recorded).
    """
    with build_lock(paths):
        settings_error = ""
        try:
            settings = read_settings(paths)
        except CoursehubError as exc:
            settings, settings_error = BookSettings(), str(exc)
        build_id, state = _start_build(paths)
        build = paths.builds / build_id
        log_path = Path(state["log"])
        try:
            if settings_error:
                raise BookError(settings_error)
            source = book_source_dir(paths.course_id, settings, build / "source", material_dir)
            state.update(commit=source.commit, source=source.kind, source_text=source.describe())
            if source.kind == "folder":
                state["source_dir"] = source.folder
            log_line(log_path, f"book source: {source.describe()}")
            kernel_env = _write_config(paths, settings, source.book, shared_root, state)
            hidden = plan_build_hidden(
                os.environ,
                books_dir=paths.root,
                material_dir=material_dir,
                shared_root=shared_root,
                source_dir=source.folder,
            )
            run_build_job(
                paths,
                settings,
                source.book,
                build / "out",
                log_path,
                kernel_env,
                on_output,
                hidden=hidden,
            )
            _switch(paths, build / HTML_SUBDIR)
        except CoursehubError as exc:
            return _record_failure(paths, build, state, str(exc))
        shutil.rmtree(build / "source", ignore_errors=True)
        _prune(paths, build_id)
        state.update(
            state="built",
            finished=now_text(),
            served_build=build_id,
            served_commit=state["commit"],
            served_source=state.get("source_text", ""),
            pid=None,
        )
        write_state(paths, state)
        return BuildOutcome(
            True, build_id, f"book of {paths.course_id} built", log_path, state["commit"]
        )


def _start_build(paths: BookPaths) -> tuple[str, dict[str, Any]]:
    """Choose a new build id, create its log, record the ``building`` state; return both.

    The state carries over :data:`SERVED_KEYS` of the previous one; its
    ``log`` is the new log's path.
    """
    previous = read_state(paths)
    taken = set(os.listdir(paths.builds)) if paths.builds.is_dir() else set()
    build_id = plan_build_id(datetime.now(UTC), taken)
    log_path = paths.logs / f"{build_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.touch()
    served: dict[str, Any] = {k: previous[k] for k in SERVED_KEYS if k in previous}
    state: dict[str, Any] = {
        **served,
        "state": "building",
        "build_id": build_id,
        "started": now_text(),
        "finished": None,
        "log": str(log_path),
        "commit": "",
        "error": None,
        "pid": os.getpid(),
    }
    write_state(paths, state)
    return build_id, state


def _write_config(
    paths: BookPaths,
    settings: BookSettings,
    book: Path,
    shared_root: Path | None,
    state: dict[str, Any],
) -> dict[str, str]:
    """Check ``book``, write its ``_config.yml`` as built; return the course kernel's environment.

    A ``conf.py`` is removed (jupyter-book builds with noconfig); the keys
    left out are logged and recorded in ``state`` (written).

    Raises
    ------
    BookError
        If the book fails :func:`coursehub.books.source.check_book` or its
        configuration sets a refused key.
    """
    log_path = Path(state["log"])
    where = f"folder {settings.folder}" if settings.folder else "the material's top folder"
    config = check_book(book, where)
    kernel, kernel_env = course_kernel(paths.course_id, shared_root)
    built, dropped = plan_config(
        config, execute=settings.execute, kernel=kernel, cell_timeout_s=settings.timeout_s
    )
    if (book / "conf.py").exists():  # jupyter-book builds with noconfig; never read it
        (book / "conf.py").unlink()
        dropped.append("conf.py")
    state["dropped_keys"] = dropped
    if dropped:
        log_line(log_path, render_dropped(dropped))
    write_state(paths, state)
    import yaml

    (book / CONFIG_FILE).write_text(yaml.safe_dump(built), encoding="utf-8")
    return kernel_env


def _record_failure(
    paths: BookPaths, build: Path, state: dict[str, Any], message: str
) -> BuildOutcome:
    """Remove the failed ``build``, log and record ``message``; return the failed outcome."""
    shutil.rmtree(build, ignore_errors=True)
    log_path = Path(state["log"])
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n[coursehub] book build failed: {message}\n")
    state.update(state="failed", finished=now_text(), error=message, pid=None)
    write_state(paths, state)
    return BuildOutcome(False, state["build_id"], message, log_path, state["commit"])


def _switch(paths: BookPaths, html: Path) -> None:
    """Point ``current`` at ``html`` atomically (a new link renamed over the old one)."""
    tmp = paths.dir / f".current.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(os.path.relpath(html, paths.dir), tmp)
    os.replace(tmp, paths.current)


def served_build(paths: BookPaths) -> str | None:
    """The id of the build ``current`` points at, or None."""
    try:
        target = Path(os.readlink(paths.current))
    except OSError:
        return None
    parts = target.parts
    return parts[1] if len(parts) > 1 and parts[0] == "builds" else None


def _prune(paths: BookPaths, current: str) -> None:
    """Remove old builds (the one served and the one before stay)."""
    for name in plan_prune(os.listdir(paths.builds), current):
        shutil.rmtree(paths.builds / name, ignore_errors=True)
