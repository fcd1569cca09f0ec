"""Nothing of a demo outlives it: the processes its hub started are found and stopped.

JupyterHub starts configurable-http-proxy, its services (course app, idle
culler, formgraders) and the servers each in a session of its own
(``start_new_session=True``), so they survive a hub killed by SIGKILL and are
then re-parented. Two mechanisms keep them in reach of the demo:

- the demo is a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``,
  https://man7.org/linux/man-pages/man2/prctl.2.html): the orphans of its
  hub become its own children instead of init's;
- while the hub runs, its descendants are listed every
  :data:`WATCH_INTERVAL_S` (for systems without subreapers).

An adopted orphan that ends is reaped at the same pace
(:func:`reap_orphans`): the runner's watchdog of every autograde or book
build job is such an orphan (a double fork), and each left a zombie.

The hub gets ``PR_SET_PDEATHSIG`` = SIGTERM, so a demo killed with SIGKILL
still has its hub stop its proxy, services and servers.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: prctl options, from <linux/prctl.h>.
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Seconds between two listings of the hub's descendants.
WATCH_INTERVAL_S = 2.0


def _prctl(option: int, value: int) -> bool:
    if os.uname().sysname != "Linux":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Make this process adopt its descendants' orphans; return False where unsupported."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """In a child (``preexec_fn``): receive ``signum`` when the parent dies."""
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signum)
    if os.getppid() != parent:  # the parent died before prctl
        os.kill(os.getpid(), signum)


def descendants(pid: int) -> list[Any]:
    """Return the ``psutil.Process`` descendants of ``pid`` (empty when it is gone)."""
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def stop_processes(processes: Iterable[Any], grace_s: float) -> list[Any]:
    """SIGTERM ``processes``, SIGKILL those alive after ``grace_s``; return those that were alive.

    Zombies are only reaped; processes whose pid was reused are left alone
    (``psutil`` checks the start time).
    """
    import psutil

    alive, targets = [], []
    for process in {p.pid: p for p in processes if p.pid != os.getpid()}.values():
        with contextlib.suppress(psutil.Error):
            if not process.is_running():
                continue
            targets.append(process)  # zombies too: waiting reaps our own
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
                process.terminate()
    _gone, still = psutil.wait_procs(targets, timeout=grace_s)
    for process in still:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(still, timeout=grace_s)
    return alive


def read_pid_file(path: Path) -> int | None:
    """Return the pid in ``path`` (a JupyterHub pid file), or None."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def proxy_of_pid_file(path: Path) -> list[Any]:
    """Return ``[psutil.Process]`` of the configurable-http-proxy named by ``path``, or []."""
    import psutil

    pid = read_pid_file(path)
    try:
        proxy = psutil.Process(pid) if pid else None
        if proxy and "configurable-http-proxy" in " ".join(proxy.cmdline()):
            return [proxy]
    except psutil.Error:
        pass
    return []


def remove_stale_pid_files(paths: Iterable[Path]) -> None:
    """Remove pid files whose process is gone.

    JupyterHub sends SIGTERM to the pid of a ``proxy.pid`` left at start-up;
    a stale one could name an unrelated process by then.
    """
    import psutil

    for path in paths:
        pid = read_pid_file(path)
        if pid is None or not psutil.pid_exists(pid):
            path.unlink(missing_ok=True)


def plan_reaps(children: Iterable[tuple[int, str]], keep: Iterable[int]) -> list[int]:
    """Return the pids to reap: the zombies among ``(pid, psutil status)`` not in ``keep`` (pure).

    ``keep`` holds the children a ``Popen`` waits for itself (the hub), whose
    exit status must stay for it.
    """
    kept = set(keep)
    return [pid for pid, status in children if status == "zombie" and pid not in kept]


def reap_orphans(keep: Iterable[int] = ()) -> list[int]:
    """Reap this process's ended children but ``keep`` (``waitpid``, no wait); return their pids.

    A subreaper (:func:`become_subreaper`) adopts the orphans of its
    descendants; nobody else waits for them, so each one that ends stays a
    zombie until this is called.
    """
    import psutil

    children = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            children.append((child.pid, child.status()))
    reaped = []
    for pid in plan_reaps(children, keep):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped.append(pid)
    return reaped


def describe_status(status: int) -> str:
    """Return how a process ended (``Popen.returncode``): "status 1", "killed by SIGKILL"."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"status {status}"
