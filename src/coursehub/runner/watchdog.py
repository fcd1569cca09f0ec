"""The job's own watchdog: it stops the job when its runner dies, and keeps its time limit.

Started by the bootstrap before the user's code (:func:`start_watchdog`), it
is a grandchild of the job (double fork: never a child the user's code could
reap or wait for), in the job's process group, with no slot descriptor and no
output. It waits (``select``) on

- the read end of the runner's lifeline pipe: end of file means the runner
  is gone (SIGKILL, OOM kill, SIGHUP, a killed ``%coursehub_run`` kernel):
  a normal job is stopped at once; a detached one (``--no-wait``) goes on,
  and the watchdog stops it at its time limit;
- a pidfd of the job's main process (pidfd_open(2), Linux 5.3): when the job
  ends, whatever it left in its process group (background children holding
  inherited slot locks) is killed, so the slots come back at once.

Stopping is SIGTERM to the process group, then SIGKILL after the grace
period (the runner's own policy). The watchdog ignores SIGTERM, SIGINT and
SIGHUP; the group's SIGKILL ends it too. The runner keeps enforcing limits
itself while it lives (its result says why a job was stopped).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

#: Seconds between two checks when no pidfd is available.
POLL_S = 0.2


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


def start_watchdog(
    parent_fd: int, orphan: str, timeout_s: float | None, grace_s: float, slot_fds: list[int]
) -> None:
    """Fork the watchdog of this process (the job's main process); return in the job at once.

    The slot descriptors are made close-on-exec in the job, so that programs
    it starts do not hold the slots after it ends.
    """
    started = time.monotonic()
    job = os.getpid()
    for fd in slot_fds:
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)
    middle = os.fork()
    if middle == 0:  # pragma: no cover - runs in forked processes
        try:
            if os.fork() == 0:
                _watch(job, parent_fd, orphan, timeout_s, grace_s, slot_fds, started)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)
    with contextlib.suppress(OSError):
        os.close(parent_fd)


def _watch(job: int, parent_fd: int, orphan: str, timeout_s: float | None, grace_s: float,
           slot_fds: list[int], started: float) -> None:  # fmt: skip  # pragma: no cover
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    for fd in slot_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    pgid = os.getpgrp()
    try:
        pidfd: int | None = os.pidfd_open(job)
    except (AttributeError, OSError):
        pidfd = None
    stop_at: float | None = None
    lifeline: int | None = parent_fd
    while True:
        now = time.monotonic()
        if stop_at is not None and now >= stop_at:
            _stop_group(pgid, job, pidfd, grace_s)
        wait = POLL_S if pidfd is None else 3600.0
        if stop_at is not None:
            wait = min(wait, max(0.0, stop_at - now))
        watched = [fd for fd in (pidfd, lifeline) if fd is not None]
        ready, _, _ = select.select(watched, [], [], wait)
        if (pidfd is not None and pidfd in ready) or (pidfd is None and not _alive(job)):
            _kill(pgid, signal.SIGKILL)  # the job has ended: nothing of it may stay
            os._exit(0)
        if lifeline is not None and lifeline in ready and not os.read(lifeline, 1):
            os.close(lifeline)
            lifeline = None
            stop_at = plan_stop_at(time.monotonic(), started, orphan, timeout_s)


def _stop_group(pgid: int, job: int, pidfd: int | None, grace_s: float) -> None:  # pragma: no cover
    _kill(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if pidfd is not None:
            if select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
        elif not _alive(job):
            break
        else:
            time.sleep(POLL_S)
    _kill(pgid, signal.SIGKILL)
    os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
