"""The job's own watchdog: it stops the job when its runner dies, and keeps its time limit.

Started by the bootstrap before the user's code (:func:`start_watchdog`), it
is a grandchild of the job (double fork: never a child the user's code could
reap or wait for), in the job's process group, with no output. It holds the
job's slot descriptors *instead of* the job: the job's own copies are closed
before the user's code runs, so that nothing the user's code forks (a
daemon that leaves the process group with ``setsid``) can keep the slots
once the job has ended. It waits (``select``) on

- the read end of the runner's lifeline pipe: end of file means the runner
  is gone (SIGKILL, OOM kill, SIGHUP, a killed ``%coursehub_run`` kernel):
  a normal job is stopped at once; a detached one (``--no-wait``) goes on,
  and the watchdog stops it at its time limit;
- the job's time limit, whether or not the runner lives: a runner that is
  alive but no longer enforces (SIGSTOP, a terminal suspended with Ctrl-Z,
  a frozen notebook kernel's cgroup, a blocked process) keeps the lifeline
  open, so the watchdog owns the deadline. While the runner lives it acts
  :data:`BACKSTOP_S` after the limit, so that the runner, which stops the
  job at the limit itself, normally does it first and reports why;
- a pidfd of the job's main process (pidfd_open(2), Linux 5.3): when the job
  ends, whatever it left in its process group is killed, and the watchdog
  exits: the slots come back at once.

Stopping is SIGTERM to the process group, then SIGKILL after the grace
period (the runner's own policy). When the job ends, the watchdog unlocks
the slots (``flock(LOCK_UN)`` on its descriptors: the lock belongs to the
open file description, so this frees it for the runner's copies too),
so the slots come back even while a stopped runner still holds them. Where the job has a cgroup
(``COURSEHUB_CGROUP_PROCS``), whatever is left in it is killed too: a
process that left the process group (``setsid``, double fork) cannot leave
the cgroup, so it dies with the job even when the runner, which otherwise
empties the cgroup, was killed. The watchdog ignores SIGTERM, SIGINT and
SIGHUP; the group's SIGKILL ends it too. The runner keeps enforcing limits
itself while it lives (its result says why a job was stopped).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import time
from collections.abc import Sequence

from coursehub.resources.processes import pid_running
from coursehub.runner.processgroup import kill_group

#: Seconds between two checks when no pidfd is available.
POLL_S = 0.2

#: Seconds after the time limit at which the watchdog stops a job whose
#: runner still lives (the runner stops it at the limit when it can).
BACKSTOP_S = 1.0


def plan_stop_at(
    orphaned_at: float, started: float, orphan: str, timeout_s: float | None
) -> float | None:
    """Return when (``time.monotonic``) an orphaned job must be stopped, or None: never (pure).

    ``orphan == "kill"``: at once; ``"keep"``: at ``started + timeout_s``
    (never without a time limit).
    """
    if orphan != "keep":
        return orphaned_at
    return None if timeout_s is None else started + timeout_s


def plan_backstop_at(started: float, timeout_s: float | None) -> float | None:
    """Return when (``time.monotonic``, s) to stop a job whose runner lives, or None (pure).

    ``started + timeout_s + BACKSTOP_S``: the runner may be stopped, frozen
    or blocked and so no longer enforce the limit; never without a limit.
    """
    return None if timeout_s is None else started + timeout_s + BACKSTOP_S


def start_watchdog(
    parent_fd: int,
    orphan: str,
    timeout_s: float | None,
    grace_s: float,
    slot_fds: list[int],
    procs_files: Sequence[str] = (),
) -> None:
    """Fork the watchdog of this process (the job's main process); return in the job at once.

    The watchdog keeps the slot descriptors; the job closes its own copies
    (and the lifeline's), so that neither the programs it starts nor the
    processes it forks hold the slots after it ends. ``procs_files``: the
    ``cgroup.procs`` files of the job's cgroup, emptied when the job ends.
    """
    started = time.monotonic()
    job = os.getpid()
    middle = os.fork()
    if middle == 0:  # pragma: no cover - runs in forked processes
        try:
            if os.fork() == 0:
                _watch(
                    job,
                    parent_fd,
                    orphan,
                    timeout_s,
                    grace_s,
                    started,
                    list(procs_files),
                    list(slot_fds),
                )
        finally:
            os._exit(0)
    os.waitpid(middle, 0)
    for fd in (*slot_fds, parent_fd):
        with contextlib.suppress(OSError):
            os.close(fd)


def _watch(
    job: int,
    parent_fd: int,
    orphan: str,
    timeout_s: float | None,
    grace_s: float,
    started: float,
    procs_files: list[str],
    slot_fds: list[int],
) -> None:  # pragma: no cover
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    pgid = os.getpgrp()
    try:
        pidfd: int | None = os.pidfd_open(job)
    except (AttributeError, OSError):
        pidfd = None
    stop_at = plan_backstop_at(started, timeout_s)  # the runner may stop enforcing
    lifeline: int | None = parent_fd
    while True:
        now = time.monotonic()
        if stop_at is not None and now >= stop_at:
            _stop_group(pgid, job, pidfd, grace_s, procs_files, slot_fds)
        wait = POLL_S if pidfd is None else 3600.0
        if stop_at is not None:
            wait = min(wait, max(0.0, stop_at - now))
        watched = [fd for fd in (pidfd, lifeline) if fd is not None]
        ready, _, _ = select.select(watched, [], [], wait)
        if (pidfd is not None and pidfd in ready) or (pidfd is None and not pid_running(job)):
            _end(pgid, procs_files, slot_fds)  # the job has ended: nothing of it may stay
        if lifeline is not None and lifeline in ready and not os.read(lifeline, 1):
            os.close(lifeline)
            lifeline = None
            stop_at = plan_stop_at(time.monotonic(), started, orphan, timeout_s)


def _stop_group(
    pgid: int,
    job: int,
    pidfd: int | None,
    grace_s: float,
    procs_files: list[str],
    slot_fds: list[int],
) -> None:  # pragma: no cover
    kill_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if pidfd is not None:
            if select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
        elif not pid_running(job):
            break
        else:
            time.sleep(POLL_S)
    _end(pgid, procs_files, slot_fds)


def _end(
    pgid: int, procs_files: list[str], slot_fds: list[int]
) -> None:  # pragma: no cover - runs in the watchdog
    """Kill the rest of the job's cgroup, unlock the slots, kill the group, this watchdog included.

    The unlock frees the slots for every holder of their open file
    descriptions, a stopped runner's copies included.
    """
    _sweep(procs_files)
    for fd in slot_fds:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
    kill_group(pgid, signal.SIGKILL)
    os._exit(0)


def plan_sweep(procs_texts: Sequence[str], me: int) -> list[int]:
    """Return the pids listed in ``cgroup.procs`` contents, other than ``me`` (pure)."""
    pids = {int(word) for text in procs_texts for word in text.split() if word.isdigit()}
    return sorted(pids - {me})


def _sweep(procs_files: list[str]) -> None:  # pragma: no cover - runs in the watchdog
    """SIGKILL every other process of the job's cgroup, until it is empty (or 5 s)."""
    deadline = time.monotonic() + 5.0
    while procs_files and time.monotonic() < deadline:
        texts = []
        for path in procs_files:
            with contextlib.suppress(OSError), open(path) as procs:
                texts.append(procs.read())
        pids = plan_sweep(texts, os.getpid())
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
