"""One book build: a copy of the material, checks, a sandboxed runner job, an atomic switch.

:func:`build_book` holds the course's build lock, copies the book's source
(:func:`book_source_dir`: the course's published material at its head when
it has one, else the host folder of its settings; no link out of the book)
into a new build folder, checks the Jupyter Book configuration and table of
contents, writes the configuration as built (:func:`coursehub.books.plan.plan_config`:
the book's allow-listed keys, the course's execution), runs ``jupyter-book
build`` inside the sandbox of :mod:`coursehub.sandbox` as a runner job on
this host (:class:`coursehub.runner.local.LocalBackend`: thread and memory limits,
a timeout; :func:`_run_job`), and only then points ``current`` at the new
HTML (a symbolic link replaced by ``rename(2)``). A failure leaves
``current`` as it was: the last good book stays served. Every step is
recorded in the state file (atomic writes), with the source used and the
configuration keys left out.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coursehub.books.plan import (
    CONFIG_FILE,
    TOC_FILE,
    plan_build_id,
    plan_config,
    plan_links_out,
    plan_missing_pages,
    plan_prune,
    render_dropped,
    render_failure,
    render_links_out,
    render_missing,
)
from coursehub.books.settings import (
    BookError,
    BookPaths,
    BookSettings,
    read_settings,
    read_state,
    write_state,
)
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


@dataclass(frozen=True)
class BookSource:
    """Where a build's book came from: ``kind`` ``material`` (at ``commit``) or ``folder``."""

    book: Path
    kind: str
    commit: str = ""
    folder: str = ""

    def describe(self) -> str:
        """``"material commit 1a2b3c4d5e6f"`` or ``"folder /srv/book-source"``."""
        if self.kind == "material":
            return f"material commit {self.commit[:12]}"
        return f"folder {self.folder}"


def _links_of_tar(members: list[tarfile.TarInfo]) -> list[tuple[str, str]]:
    """The symbolic links of an archive (hard links: tar's ``data`` filter keeps them inside)."""
    return [(m.name, m.linkname) for m in members if m.issym()]


def _links_of_folder(root: Path) -> list[tuple[str, str]]:
    links = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink():
                links.append((path.relative_to(root).as_posix(), os.readlink(path)))
    return links


def book_source_dir(
    course_id: str, settings: BookSettings, dest: Path, material_dir: Path | None = None
) -> BookSource:
    """Copy the course's book source into ``dest``; return where it came from.

    The one place that decides where a book comes from (docs/books.md): the
    course's published material (:mod:`coursehub.material`) at its head
    when it has one, extracted with ``git archive``; else the settings'
    ``source_dir`` (a host folder, copied). The book is ``dest /
    settings.folder``. A symbolic link pointing outside the book
    (:func:`coursehub.books.plan.plan_links_out`) refuses the build; none
    is ever followed.

    Raises
    ------
    BookError
        If the course has neither published material nor a source folder, the
        material cannot be read, or the source holds a link out of the book.
    """
    from coursehub.material.layout import MaterialLayout, material_root
    from coursehub.material.mirror import published_head

    layout = MaterialLayout(material_dir or material_root())
    commit = published_head(layout, course_id)
    if not commit and settings.source_dir:
        source = Path(settings.source_dir)
        if not source.is_dir():
            raise BookError(f"the book's source folder {source} does not exist")
        out = plan_links_out(_links_of_folder(source), settings.folder)
        if out:
            raise BookError(render_links_out(out))
        shutil.copytree(
            source, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "_build")
        )
        return BookSource(dest / settings.folder, "folder", folder=str(source))
    if not commit:
        raise BookError(
            f"course {course_id} has no material yet (set its repository with "
            f"`coursehub material set`, or a source folder with `coursehub book settings "
            f"{course_id} --source-dir DIR`)"
        )
    from coursehub.material.gitcmd import plan_git_env

    git_dir = str(layout.published_repo(course_id))
    done = subprocess.run(
        ["git", "--git-dir", git_dir, "archive", "--format=tar", commit],
        env=plan_git_env(layout.home, protocols="file"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise BookError(f"reading the material of {course_id}: {done.stderr.decode()[-300:]}")
    dest.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
            out = plan_links_out(_links_of_tar(archive.getmembers()), settings.folder)
            if out:
                raise BookError(render_links_out(out))
            archive.extractall(dest, filter="data")
    except tarfile.TarError as exc:  # the data filter's refusals (a special file...)
        raise BookError(f"the material of {course_id} cannot be extracted: {exc}") from None
    return BookSource(dest / settings.folder, "material", commit=commit)


def check_book(book: Path, where: str) -> dict[str, Any]:
    """Check the book's configuration and table of contents; return its configuration.

    Raises
    ------
    BookError
        No folder, no ``_config.yml`` or ``_toc.yml``, unreadable YAML, or a
        table of contents naming a page that is not there.
    """
    import yaml
    from sphinx_external_toc.parsing import MalformedError, parse_toc_yaml

    if not book.is_dir():
        raise BookError(f"the material has no {where} (the book folder of its settings)")
    for name in (CONFIG_FILE, TOC_FILE):
        if not (book / name).is_file():
            raise BookError(
                f"no Jupyter Book configuration: {where} has no {name} "
                "(set the book's folder with `coursehub book settings COURSE_ID --folder DIR`)"
            )
    try:
        site_map = parse_toc_yaml(book / TOC_FILE)
    except (MalformedError, yaml.YAMLError) as exc:
        raise BookError(f"{TOC_FILE} in {where} is not a valid table of contents: {exc}") from None
    files = {p.relative_to(book).as_posix() for p in book.rglob("*") if p.is_file()}
    missing = plan_missing_pages(list(site_map), files)
    if missing:
        raise BookError(render_missing(missing, where))
    try:
        config = yaml.safe_load((book / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BookError(f"{CONFIG_FILE} in {where} is not valid YAML: {exc}") from None
    if not isinstance(config, dict):
        raise BookError(f"{CONFIG_FILE} in {where} must be a YAML mapping")
    return config


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
        previous = read_state(paths)
        taken = set(os.listdir(paths.builds)) if paths.builds.is_dir() else set()
        build_id = plan_build_id(datetime.now(UTC), taken)
        build = paths.builds / build_id
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
        commit = ""
        try:
            if settings_error:
                raise BookError(settings_error)
            source = book_source_dir(paths.course_id, settings, build / "source", material_dir)
            book, commit = source.book, source.commit
            state.update(commit=commit, source=source.kind, source_text=source.describe())
            if source.kind == "folder":
                state["source_dir"] = source.folder
            _log(log_path, f"book source: {source.describe()}")
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
                _log(log_path, render_dropped(dropped))
            write_state(paths, state)
            import yaml

            (book / CONFIG_FILE).write_text(yaml.safe_dump(built), encoding="utf-8")
            hidden = plan_build_hidden(
                os.environ,
                books_dir=paths.root,
                material_dir=material_dir,
                shared_root=shared_root,
                source_dir=source.folder,
            )
            _run_job(
                paths,
                settings,
                book,
                build / "out",
                log_path,
                kernel_env,
                on_output,
                hidden=hidden,
            )
            _switch(paths, build / HTML_SUBDIR)
        except CoursehubError as exc:
            shutil.rmtree(build, ignore_errors=True)
            message = str(exc)
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(f"\n[coursehub] book build failed: {message}\n")
            state.update(state="failed", finished=now_text(), error=message, pid=None)
            write_state(paths, state)
            return BuildOutcome(False, build_id, message, log_path, commit)
        shutil.rmtree(build / "source", ignore_errors=True)
        _prune(paths, build_id)
        state.update(
            state="built",
            finished=now_text(),
            served_build=build_id,
            served_commit=commit,
            served_source=state.get("source_text", ""),
            pid=None,
        )
        write_state(paths, state)
        return BuildOutcome(True, build_id, f"book of {paths.course_id} built", log_path, commit)


def plan_build_hidden(
    environ: dict[str, str] | os._Environ[str],
    *,
    books_dir: Path,
    material_dir: Path | None,
    shared_root: Path | None,
    source_dir: str = "",
) -> list[str]:
    """Return the folders a book build must not see (pure but for the data folder's default).

    Every course's books (``BOOKS_DIR``), the material root (mirrors and
    credentials of every course), coursehub's data folder (the catalog), the
    runner's slots, the grading courses and exchange, the shared root of the
    courses and the host folder the book was copied from. The build works
    on its own copy, outside all of them.
    """
    from coursehub.catalog.db import data_dir
    from coursehub.material.layout import material_root
    from coursehub.runner.slots import DEFAULT_SLOTS_DIR

    folders: list[str | Path] = [
        books_dir,
        material_dir or material_root(environ),
        data_dir(environ),
        environ.get("COURSEHUB_SLOTS_DIR") or DEFAULT_SLOTS_DIR,
        environ.get("COURSEHUB_GRADING_COURSES") or "/srv/nbgrader/courses",
        environ.get("COURSEHUB_GRADING_EXCHANGE") or "/usr/local/share/nbgrader/exchange",
    ]
    if shared_root is not None:
        folders.append(shared_root)
    if source_dir:
        folders.append(source_dir)
    return sorted({str(Path(f)) for f in folders})


def _copy_out(html: Path, dest: Path) -> None:
    """Copy the built HTML to ``dest``: folders and regular files only, never a link."""

    def skip(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if not _regular_or_dir(Path(folder) / n)]

    shutil.copytree(html, dest, symlinks=True, ignore=skip)


def _regular_or_dir(path: Path) -> bool:
    import stat

    mode = path.lstat().st_mode
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def _run_job(
    paths: BookPaths,
    settings: BookSettings,
    book: Path,
    out: Path,
    log_path: Path,
    extra_env: dict[str, str],
    on_output: Callable[[str], None] | None,
    *,
    hidden: list[str],
) -> None:
    """Run ``jupyter-book build`` in the sandbox, as a runner job with the course's limits.

    The book is copied into a private job folder (:func:`coursehub.sandbox.workdir.make_job_dir`,
    owned by the sandbox account), built there by ``python -m coursehub.books.job`` started
    through :func:`coursehub.sandbox.plan.make_plan` and
    :func:`coursehub.sandbox.command.plan_sandbox_command` (the sandbox account as root, no
    network, ``hidden`` covered, an allow-listed environment), and its HTML copied to ``out``
    (no link followed). The job folder is removed however the build ended.

    Raises
    ------
    BookError
        If the sandbox cannot run here (:func:`coursehub.sandbox.preflight.check_plan`), the
        build failed or left no ``index.html``.
    """
    from coursehub.runner.api import run
    from coursehub.runner.local import LocalBackend
    from coursehub.sandbox.command import chown_tree, plan_sandbox_command
    from coursehub.sandbox.env import plan_sandbox_env
    from coursehub.sandbox.plan import interpreter_paths, make_plan
    from coursehub.sandbox.preflight import check_plan
    from coursehub.sandbox.workdir import make_job_dir

    job = make_job_dir()
    try:
        work, job_out, home, stage = job / "book", job / "out", job / "home", job / "stage"
        shutil.copytree(book, work, symlinks=True)
        for folder in (job_out, home, home / "tmp", stage):
            folder.mkdir()
        needed = [*interpreter_paths(), *extra_env.values()]
        plan = make_plan(hidden, keep=[job], needed=needed, stage_dir=stage)
        try:
            check_plan(plan, needed=needed)
        except CoursehubError as exc:
            raise BookError(f"the book cannot be built in the sandbox: {exc}") from None
        env = plan_sandbox_env(os.environ)
        env.update(
            PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin:/usr/bin"]),
            HOME=str(home),
            TMPDIR=str(home / "tmp"),
            **extra_env,
        )
        if plan.account is not None:
            env["USER"] = env["LOGNAME"] = plan.account.name
            chown_tree(job, plan.account.uid, plan.account.gid)
        inner = [sys.executable, "-m", "coursehub.books.job", str(work), str(job_out)]
        _log(log_path, f"sandbox: {plan.mode} mode, as {_account_name(plan)}, network off")
        result = run(
            "coursehub.books.job",
            ["--", *plan_sandbox_command(inner, plan)],
            module=True,
            backend=LocalBackend(),
            on_output=on_output or (lambda _text: None),
            n_threads=settings.n_threads,
            mem_limit=settings.mem_limit,
            timeout_s=settings.timeout_s,
            name=f"book-{paths.course_id}",
            cwd=job,
            env=env,
            log_path=log_path,
            inherit_env=False,
        )
        html = job_out / "_build" / "html"
        if not result.ok or not (html / "index.html").is_file():
            why = render_failure(result.killed_reason, result.returncode, _last(log_path))
            raise BookError(why)
        _copy_out(html, out / "_build" / "html")
    finally:
        shutil.rmtree(job, ignore_errors=True)


def _account_name(plan: Any) -> str:
    return plan.account.name if plan.account is not None else "this account"


def _log(log_path: Path, line: str) -> None:
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"[coursehub] {line}\n")


def _last(log_path: Path) -> str:
    """The last line of the log that says what went wrong, for the one-line message."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        text = line.strip()
        if text and not text.startswith("[coursehub]") and not set(text) <= set("=-^"):
            return text[-300:]
    return ""


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
