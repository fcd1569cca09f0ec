"""Private working folders of sandboxed jobs: made 0700, removed however the job ended."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from coursehub.sandbox.account import find_sandbox_account, sandbox_user_name

#: Parent of the jobs' private folders when running as root (mode 0711).
ROOT_WORK_DIR = Path("/tmp/coursehub-grading")


def make_job_dir() -> Path:
    """Return a new private folder for one sandboxed job (0700; in :data:`ROOT_WORK_DIR` as root).

    :data:`ROOT_WORK_DIR` is 0711 and root's, so that the sandbox account can
    enter its own folder but cannot list the others (whose names are random).
    The folder's name carries this process's pid; folders of processes that
    have ended (an autograde killed, a kernel that died before it
    started) are removed first (:func:`sweep_job_dirs`).
    """
    parent = Path(tempfile.gettempdir())
    prefix = JOB_PREFIX_USER
    if os.geteuid() == 0:
        parent, prefix = ROOT_WORK_DIR, JOB_PREFIX_ROOT
        try:
            ROOT_WORK_DIR.mkdir(mode=0o711)
        except FileExistsError:
            info = ROOT_WORK_DIR.lstat()
            if not ROOT_WORK_DIR.is_dir() or ROOT_WORK_DIR.is_symlink() or info.st_uid != 0:
                raise RuntimeError(f"{ROOT_WORK_DIR} must be a folder owned by root") from None
        os.chmod(ROOT_WORK_DIR, 0o711)
    sweep_job_dirs(parent, prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


#: Name prefixes of the kernels' private folders (then ``<pid>-<random>``).
JOB_PREFIX_ROOT = "job-"
JOB_PREFIX_USER = "coursehub-grade-"


def sweep_job_dirs(parent: Path | None = None, prefix: str | None = None) -> list[Path]:
    """Remove the private folders whose process has ended; return them.

    A folder is ``<prefix><pid>-<random>``; it is removed when ``pid`` is no
    longer running (:func:`coursehub.resources.processes.pid_running`) and
    the folder is this account's. Folders of the layout before pids were
    recorded (``<prefix><random>``) are removed when older than a day.
    """
    from coursehub.resources.processes import pid_running

    if parent is None:
        is_root = os.geteuid() == 0
        parent = ROOT_WORK_DIR if is_root else Path(tempfile.gettempdir())
        prefix = JOB_PREFIX_ROOT if is_root else JOB_PREFIX_USER
    assert prefix is not None
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix) or entry.is_symlink() or not entry.is_dir():
            continue
        pid_text = entry.name[len(prefix) :].partition("-")[0]
        try:
            info = entry.lstat()
        except FileNotFoundError:
            continue
        if info.st_uid not in (os.geteuid(), *_sandbox_uids()) and os.geteuid() != 0:
            continue
        if pid_text.isdigit():
            stale = not pid_running(int(pid_text))
        else:
            stale = time.time() - info.st_mtime > 86400
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _sandbox_uids() -> tuple[int, ...]:
    account = find_sandbox_account(sandbox_user_name())
    return (account.uid,) if account else ()
