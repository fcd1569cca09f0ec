"""``jupyter-book build`` started in the sandbox (:mod:`coursehub.sandbox`) as a runner job.

The job itself is :mod:`coursehub.books.job`; here it is given a private
copy of the book, a sandbox plan hiding every other folder of coursehub
(:func:`plan_build_hidden`), the course's limits, and its HTML is copied
back without following a link.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coursehub.books.plan import render_failure
from coursehub.books.settings import BookError, BookPaths, BookSettings
from coursehub.errors import CoursehubError

if TYPE_CHECKING:
    from coursehub.sandbox.command import SandboxPlan


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
    from coursehub.material.layout import material_root
    from coursehub.runner.slots import DEFAULT_SLOTS_DIR
    from coursehub.settings import data_dir

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


def run_build_job(
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
    from coursehub.sandbox.command import plan_sandbox_command
    from coursehub.sandbox.workdir import make_job_dir

    job = make_job_dir()
    try:
        work, job_out, home, stage = job / "book", job / "out", job / "home", job / "stage"
        shutil.copytree(book, work, symlinks=True)
        for folder in (job_out, home, home / "tmp", stage):
            folder.mkdir()
        plan, env = _plan_job_sandbox(job, hidden, extra_env)
        inner = [sys.executable, "-m", "coursehub.books.job", str(work), str(job_out)]
        log_line(log_path, f"sandbox: {plan.mode} mode, as {_account_name(plan)}, network off")
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


def _plan_job_sandbox(
    job: Path, hidden: list[str], extra_env: dict[str, str]
) -> tuple[SandboxPlan, dict[str, str]]:
    """Return the sandbox plan of the job in folder ``job`` and its environment.

    ``hidden`` is covered, ``extra_env`` (the course kernel's ``JUPYTER_PATH``)
    added and its folders kept readable; as root, ``job`` becomes the sandbox
    account's.

    Raises
    ------
    BookError
        If the sandbox cannot run here (:func:`coursehub.sandbox.preflight.check_plan`).
    """
    from coursehub.sandbox.command import chown_tree
    from coursehub.sandbox.env import plan_sandbox_env
    from coursehub.sandbox.plan import interpreter_paths, make_plan
    from coursehub.sandbox.preflight import check_plan

    home = job / "home"
    needed = [*interpreter_paths(), *extra_env.values()]
    plan = make_plan(hidden, keep=[job], needed=needed, stage_dir=job / "stage", private_dir=job)
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
    return plan, env


def _account_name(plan: Any) -> str:
    return plan.account.name if plan.account is not None else "this account"


def log_line(log_path: Path, line: str) -> None:
    """Append ``[coursehub] line`` to the build log ``log_path``."""
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
