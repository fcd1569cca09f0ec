"""Start an autograde in the background (for the course page): returns at once.

:func:`start_autograde` takes the assignment's autograde lock
(:mod:`coursehub.grading.autograde.lock`) in the calling process, so that a
second press of the button is refused at once, then starts ``coursehub
grading autograde COURSE_ID ASSIGNMENT`` detached (its own session, stdin
from ``/dev/null``, output appended to
``<course_dir>/coursehub/autograde-<assignment>.log``) and hands it the
locked descriptor (``pass_fds`` and
:data:`coursehub.grading.autograde.lock.LOCK_FD_VAR`). The process gets the
allow-listed environment of :func:`coursehub.sandbox.env.plan_launch_env`
(the catalog and ``COURSEHUB_GRADING_*``, no hub token or secret key).
Its progress: :func:`coursehub.grading.autograde.progress.read_autograde_progress`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping

from coursehub.grading.autograde.progress import (
    AutogradeProgress,
    launch_log_path,
    write_progress,
)


def plan_autograde_command(
    course_id: str,
    assignment: str,
    parallel: int | None = None,
    force: bool = False,
    python: str = sys.executable,
) -> list[str]:
    """Return the ``coursehub grading autograde`` command line (pure)."""
    command = [python, "-m", "coursehub", "grading", "autograde", course_id, assignment]
    if parallel is not None:
        command += ["--parallel", str(parallel)]
    if force:
        command.append("--force")
    return command


def start_autograde(
    course_id: str,
    assignment: str,
    by: str,
    *,
    parallel: int | None = None,
    force: bool = False,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Start the autograde of ``assignment`` in the background; return its pid at once.

    Parameters
    ----------
    course_id
        The course; its layout comes from ``COURSEHUB_GRADING_*`` in
        ``environ`` (:func:`coursehub.grading.layout.layout_from_env`), as in
        the started process.
    by
        Who asked (the hub user): shown to whoever is refused meanwhile.
    parallel, force
        ``--parallel`` and ``--force`` of ``coursehub grading autograde``.
    environ
        The caller's environment (default ``os.environ``); only its
        allow-listed part reaches the process.

    Raises
    ------
    AutogradeRunningError
        If an autograde of ``assignment`` is already running (nothing started).
    UsageError
        If ``parallel`` < 1 or the grading environment is malformed.
    """
    from coursehub.errors import UsageError
    from coursehub.grading.autograde.lock import LOCK_FD_VAR, acquire_autograde_lock
    from coursehub.grading.layout import layout_from_env
    from coursehub.sandbox.env import plan_launch_env

    if parallel is not None and parallel < 1:
        raise UsageError(f"parallel must be at least 1, got {parallel}")
    env = dict(os.environ if environ is None else environ)
    layout = layout_from_env(course_id, env)
    lock = acquire_autograde_lock(layout, assignment, by)
    try:
        log = launch_log_path(layout, assignment)
        child_env = {**plan_launch_env(env), LOCK_FD_VAR: str(lock.fd)}
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                plan_autograde_command(course_id, assignment, parallel, force),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=child_env,
                pass_fds=[lock.fd],
            )
        # reap the child when it ends, so it never lingers as a zombie of the
        # long-lived web process (and Popen is not collected while it runs)
        threading.Thread(target=proc.wait, name=f"autograde-{proc.pid}", daemon=True).start()
        lock.describe(by, proc.pid)
        now = time.time()
        starting = AutogradeProgress(
            layout.course_id, assignment, "starting", started_at=now, updated_at=now, pid=proc.pid
        )
        write_progress(layout, starting)
        return proc.pid
    finally:
        lock.release()  # the child holds its own copy of the locked descriptor
