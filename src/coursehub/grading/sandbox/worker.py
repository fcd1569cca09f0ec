"""A long-lived grading worker: nbgrader imported once, one submission after another.

``python -m coursehub.grading.sandbox.worker --requests FIFO --replies FIFO``
runs as one runner job (:func:`coursehub.grading.autograde.pool.worker_spec`:
the one-shot job's allow-listed environment, threads, memory limit and
admission slot) and reads one JSON line per submission from ``--requests``::

    {"student": "alice", "argv": ["autograde", "ps1", "--student=alice", ...],
     "log": "/.../autograde-ps1-alice.log"}

``argv`` is exactly the one-shot job's command line
(:func:`coursehub.grading.autograde.job.autograde_args`). For each request it
runs nbgrader's ``NbGraderApp`` with :func:`coursehub.grading.sandbox.kernel.sandbox_config`
in this process, its output (file descriptors 1 and 2) in the request's log
as the one-shot job's, then answers one JSON line on ``--replies``::

    {"student": "alice", "returncode": 0, "oom": false}

``returncode`` is what the one-shot job's interpreter would have exited with
(``sys.exit`` of nbgrader, 1 for an exception); ``oom`` says the kernel's OOM
killer killed a process of this job's memory cgroup meanwhile (the student's
kernel: the one-shot job would have been reported "exceeded its memory
limit"). End of file on ``--requests`` ends the worker.

What a submission leaves behind, and what is rebuilt for the next one:

- the student's cells always run in a fresh kernel process, started and
  shut down by :class:`coursehub.grading.sandbox.kernel.SandboxKernelManager`
  in its own PID namespace, so that every process the kernel left is killed
  when it ends (pid_namespaces(7)); its private folder (working copy, home,
  ``TMPDIR``) is removed, and any left by a failed start too;
- with ``$COURSEHUB_GRADING_FORK_SERVER`` true (the default) that kernel is
  forked from the worker's kernel fork server, which imported numpy and
  torch once (:mod:`coursehub.grading.sandbox.forkclient`; what a forked
  kernel inherits, and what the server removes after it, is in
  :mod:`coursehub.grading.sandbox.forkserver`), instead of a new
  interpreter in a PID namespace of its own;
- nbgrader's application, its subapplication, their configuration (the
  course's ``nbgrader_config.py`` is read again) and logging are rebuilt:
  ``NbGrader.reset`` (nbgrader's own, for running apps in one process) then
  a new ``NbGraderApp``;
- ``os.environ``, ``sys.path`` (nbgrader puts the working directory first at
  each start) and the working directory are put back as they were when the
  worker started, and what the submission's nbgrader left is collected
  (``gc.collect``; what the worker imported at its start is frozen out of
  that collection: :func:`freeze_imports`).

Why a kernel cannot tamper with this worker (and so with a later grade):
the kernel runs as the sandbox account when coursehub runs as root, the
worker as root: another uid, so ``ptrace`` and ``/proc/PID/mem`` are refused
(ptrace(2), "Ptrace access mode checking"). With user namespaces (not root)
the kernel has the worker's uid, but it runs in a PID namespace of its own,
where the worker has no PID to name, with every capability dropped; in both
modes the folders holding this worker's pipes and the course are covered
(:func:`coursehub.grading.sandbox.plan.plan_hidden`). On top of that the
worker makes itself non-dumpable (``PR_SET_DUMPABLE`` 0, prctl(2)), so even a
process of its own uid without ``CAP_SYS_PTRACE`` cannot attach to it or read
its memory whatever ``kernel.yama.ptrace_scope`` says. Modes without a PID
namespace (``uid``, ``none``) never get a worker
(:func:`coursehub.grading.autograde.pool.worker_allowed`): a kernel's leftover
process could outlive its submission there.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: prctl(2) option and value: no core dumps, no ptrace attach by the same uid.
PR_SET_DUMPABLE = 4


def make_undumpable() -> bool:
    """Make this process non-dumpable (prctl ``PR_SET_DUMPABLE`` 0); return True on success."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def oom_kills(cgroup_file: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int:
    """Return the OOM kills counted in this process's memory cgroup (0 when unknown).

    cgroup v2 ``memory.events`` (``oom_kill``), else v1 ``memory.oom_control``
    (``oom_kill``, Linux 4.13+): Documentation/admin-guide/cgroup-v2.rst.
    """
    try:
        lines = Path(cgroup_file).read_text().splitlines()
    except OSError:
        return 0
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidates.append(Path(root) / path.lstrip("/") / "memory.events")
        elif "memory" in controllers.split(","):
            candidates.append(Path(root) / "memory" / path.lstrip("/") / "memory.oom_control")
    for candidate in candidates:
        with contextlib.suppress(OSError, ValueError):
            for row in candidate.read_text().splitlines():
                key, _, value = row.partition(" ")
                if key == "oom_kill":
                    return int(value)
    return 0


@contextlib.contextmanager
def output_to(log_path: str) -> Iterator[None]:
    """Send file descriptors 1 and 2 (and what a kernel started meanwhile inherits) to ``log_path``.

    The log is appended to and made 0600, as the runner makes a job's log.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (log, *saved):
            os.close(fd)


def run_nbgrader(argv: Sequence[str], fork: bool = False) -> int:
    """Run one nbgrader command line in this process; return the one-shot job's exit status.

    ``fork``: the kernel is forked from this worker's kernel fork server
    (:mod:`coursehub.grading.sandbox.forkclient`).
    """
    import traceback

    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp

    from coursehub.grading.sandbox.kernel import sandbox_config

    NbGraderApp.clear_instance()
    config = sandbox_config()
    config.SandboxKernelManager.fork_server = fork
    app = NbGraderApp.instance(config=config)
    try:
        app.initialize(list(argv))
        app.start()
        return 0
    except NoStart:  # a subapp ran: what JupyterApp.launch_instance returns quietly on
        return 0
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception:  # what the interpreter would print before exiting 1
        traceback.print_exc()
        return 1
    finally:
        with contextlib.suppress(Exception):
            app.reset()
        NbGraderApp.clear_instance()


class Worker:
    """The state a worker puts back after every submission (see the module docstring)."""

    def __init__(self, fork: bool = False) -> None:
        self.fork = fork
        self.environ = dict(os.environ)
        self.path = list(sys.path)
        self.cwd = os.getcwd()

    def restore(self) -> None:
        """Put back the environment, import path and working directory of the worker's start."""
        os.environ.clear()
        os.environ.update(self.environ)
        sys.path[:] = self.path
        os.chdir(self.cwd)
        gc.collect()

    def grade(self, request: dict[str, Any]) -> dict[str, Any]:
        """Grade one request; return its reply."""
        before = oom_kills()
        try:
            with output_to(str(request["log"])):
                code = run_nbgrader([str(a) for a in request["argv"]], self.fork)
        finally:
            self.restore()
            remove_own_job_dirs()
        return {
            "student": request.get("student", ""),
            "returncode": code,
            "oom": oom_kills() > before,
        }


def remove_own_job_dirs() -> None:
    """Remove the kernels' private folders this process made and left (a failed start)."""
    import shutil
    import tempfile

    from coursehub.sandbox.workdir import JOB_PREFIX_ROOT, JOB_PREFIX_USER, ROOT_WORK_DIR

    if os.geteuid() == 0:
        parent, prefix = ROOT_WORK_DIR, JOB_PREFIX_ROOT
    else:
        parent, prefix = Path(tempfile.gettempdir()), JOB_PREFIX_USER
    for entry in parent.glob(f"{prefix}{os.getpid()}-*"):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def freeze_imports() -> None:
    """Leave what this worker has imported so far out of every later garbage collection.

    ``gc.freeze()`` moves every object the collector tracks now (modules,
    classes, functions of nbgrader and its libraries: about 270,000) to a
    permanent generation that later collections do not scan (Python's
    ``gc`` documentation, ``gc.freeze``). :meth:`Worker.restore`'s full
    collection after each submission then scans only what that submission
    made: about 0.005 s instead of 0.115 s (demo assignment, 2-core
    machine). Frozen objects are still freed when no reference is left;
    nothing a kernel runs is in this process.
    """
    gc.freeze()


#: This worker's SQLAlchemy engines, by database URL and options (:func:`share_gradebook_engines`).
_ENGINES: dict[str, Any] = {}


def share_gradebook_engines() -> None:
    """Have every nbgrader ``Gradebook`` of this worker reuse one SQLAlchemy engine per database.

    nbgrader's ``Gradebook.__init__`` makes a new engine each time
    (``create_engine(db_url)`` in ``nbgrader/api.py``), nine times a
    submission (the autograde's ``init_assignment``, ``SaveAutoGrades``,
    ``OverwriteCells``...). A statement compiled by SQLAlchemy is cached
    in its engine's own cache, under a key holding the engine's dialect
    (SQLAlchemy 2.x, "SQL Compilation Caching"; ``_compile_w_cache`` in
    ``sqlalchemy/sql/elements.py``), so every query was compiled again for
    each ``Gradebook``: 30 compilations a submission (profiled on the
    benchmark notebook: 0.22 s of 0.78 s outside the kernel, profiler's
    overhead included). With one engine per URL, kept while the worker
    lives, each statement is compiled once a batch.

    An engine holds no rows (each ``Gradebook`` has its own ``Session``) and
    ``Gradebook.close`` still disposes of its pool, so no connection outlives
    its ``Gradebook``, as before. An in-memory SQLite database (one per
    engine) is never shared.
    """
    import nbgrader.api
    from sqlalchemy import create_engine, make_url

    def engine_for(url: Any, **options: Any) -> Any:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
            return create_engine(url, **options)
        key = repr((parsed.render_as_string(hide_password=False), sorted(options.items())))
        if key not in _ENGINES:
            _ENGINES[key] = create_engine(url, **options)
        return _ENGINES[key]

    nbgrader.api.create_engine = engine_for


def serve(requests_path: str, replies_path: str) -> None:
    """Answer every request line of ``requests_path`` on ``replies_path`` until end of file."""
    import nbgrader.apps.nbgraderapp  # noqa: F401  (paid once: the reason for a worker)

    import coursehub.grading.sandbox.kernel  # noqa: F401  (run_nbgrader's, before the freeze)
    from coursehub.grading.sandbox.forkclient import close_fork_server, fork_wanted

    share_gradebook_engines()
    freeze_imports()

    worker = Worker(fork=fork_wanted())
    try:
        with (
            open(requests_path, encoding="utf-8") as requests,
            open(replies_path, "w", encoding="utf-8") as replies,
        ):
            for line in requests:
                if not line.strip():
                    continue
                reply = worker.grade(json.loads(line))
                replies.write(json.dumps(reply) + "\n")
                replies.flush()
    finally:
        close_fork_server()


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--requests`` and ``--replies``, make this process non-dumpable, serve."""
    parser = argparse.ArgumentParser(prog="python -m coursehub.grading.sandbox.worker")
    parser.add_argument("--requests", required=True, help="FIFO of request lines")
    parser.add_argument("--replies", required=True, help="FIFO of reply lines")
    args = parser.parse_args(argv)
    if not make_undumpable():
        print("[coursehub] grading worker: PR_SET_DUMPABLE not available", file=sys.stderr)
    serve(args.requests, args.replies)


if __name__ == "__main__":
    main()
