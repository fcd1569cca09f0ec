"""A server that dies is noticed (at once where it is local), and the student is told why.

JupyterHub notices a server that exited by itself only at its next periodic
poll (``Spawner.poll_interval``, 30 s by default): until then its route stays
in the proxy, so ``/user/<name>/lab`` answers "503 Service Unavailable, your
server appears to be down" and the Start button leads back to the same 503
(jupyterhub/systemdspawner#87, #7). :class:`ServerExitWatchMixin` watches the
server's process with a pidfd (``pidfd_open(2)``, Linux >= 5.3; it works for
a process the hub re-attached after a restart too) and, as soon as it exits,
runs the spawner's ``poll_and_notify``: the hub's stop callbacks remove the
route and mark the server stopped, so the next reload shows JupyterHub's
"Server not running" page and Start starts a new server. Where a pidfd
cannot be opened the periodic poll stays the only check.

When the hub's own poll (periodic or the watch) finds the server gone,
:func:`describe_server_exit` says why: out of memory (its cgroup's OOM-kill
counter, ``memory.events`` on cgroup v2, ``memory.oom_control`` on v1; Linux
``Documentation/admin-guide/cgroup-v2.rst``), killed by signal N, or exited
with status N. :data:`STOP_NOTICES` keeps that line for the student's
"Server not running" page (``hub_templates/not_running.html``, through
``c.JupyterHub.template_vars["server_stop_notices"]``) until the next start.

The spawners that cannot watch a process get the same notice from their
poll (:class:`StopNoticeMixin`): :class:`SystemdStopNoticeMixin` says why from
the unit's ``Result`` (``systemctl show``), :class:`SlurmStopNoticeMixin` from
the job's ``JobState`` and ``ExitCode`` (``scontrol show job``); the words are
:mod:`coursehub.spawn.exitstates`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from typing import Any

from traitlets import HasTraits

from coursehub.resources.cgroups import CgroupStats
from coursehub.spawn.exitstates import (
    describe_slurm_exit,
    describe_status,
    describe_systemd_exit,
    notice,
    oom_notice,
    parse_key_values,
)

#: Seconds to wait for the kernel to reap a re-attached (non-child) server
#: after its pidfd says it exited (it is a zombie until its new parent reaps it).
REAP_WAIT_S = 5.0


def describe_server_exit(
    status: int | None, stats: CgroupStats | None, mem_limit: int | None
) -> str:
    """Return one line on why a server that was not asked to stop ended (pure).

    Parameters
    ----------
    status
        The spawner's poll result: a negative value is the signal that
        ended a process the hub started (``subprocess.Popen.returncode``), a
        positive one its exit status; 0 or None when the hub could not know
        (a server re-attached after a hub restart).
    stats
        The server cgroup's counters read before it was removed, or None.
    mem_limit
        The server's memory limit in bytes, or None.
    """
    oom = bool(stats and stats.oom_kills)
    if stats is not None and stats.oom_kills is None and status == -signal.SIGKILL:
        oom = stats.mem_limit_hits > 0
    if oom:
        return oom_notice(mem_limit)
    return describe_status(status)


class StopNotices:
    """The hub process's notices on servers that stopped by themselves, by user and server name.

    Thread-safe; one instance, :data:`STOP_NOTICES`, per hub process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notices: dict[tuple[str, str], str] = {}

    def record(self, user_name: str, server_name: str, notice: str) -> None:
        """Keep ``notice`` for that server until :meth:`clear`."""
        with self._lock:
            self._notices[(user_name, server_name)] = notice

    def clear(self, user_name: str, server_name: str) -> None:
        """Forget that server's notice (it is starting again)."""
        with self._lock:
            self._notices.pop((user_name, server_name), None)

    def for_user(self, user: Any) -> dict[str, str]:
        """Return ``{server_name: notice}`` for a JupyterHub user (None: nobody signed in).

        The form of a callable ``c.JupyterHub.template_vars`` value, which
        JupyterHub calls with the page's user (``handlers/base.py``,
        ``template_namespace``).
        """
        name = getattr(user, "name", None)
        if not name:
            return {}
        with self._lock:
            return {server: text for (who, server), text in self._notices.items() if who == name}


#: The notices of this hub process.
STOP_NOTICES = StopNotices()


def server_stop_notices(user: Any) -> dict[str, str]:
    """``c.JupyterHub.template_vars["server_stop_notices"]``: :meth:`StopNotices.for_user`."""
    return STOP_NOTICES.for_user(user)


class StopNoticeMixin(HasTraits):
    """Mix in before a Spawner: a server the hub's poll finds gone gets its notice.

    JupyterHub calls ``poll_and_notify`` from its periodic poll and from the
    home page (``HomeHandler``), never for a stop it asked for (it calls
    ``stop_polling`` first). :meth:`exit_context` is read before the poll
    (batchspawner's poll clears the job id), :meth:`describe_exit` after it;
    a failure there leaves the plain "stopped unexpectedly" line.
    """

    # attributes provided by the Spawner class this is mixed into
    user: Any
    name: str
    log: Any
    mem_limit: int | None

    async def start(self) -> Any:
        """Forget the last stop's notice, then start the server."""
        STOP_NOTICES.clear(self.user.name, self.name or "")
        return await super().start()  # type: ignore[misc]

    def exit_context(self) -> Any:
        """Return what :meth:`describe_exit` needs that the poll may clear (default: None)."""
        return None

    async def describe_exit(self, status: int, context: Any) -> str:
        """Return the notice for a server found gone with poll status ``status``."""
        return describe_status(status)

    #: Set while :meth:`poll_and_notify` runs: ``(context,)`` of :meth:`exit_context`.
    _notice_armed: tuple[Any] | None = None

    async def poll_and_notify(self) -> int | None:
        """JupyterHub's poll and stop callbacks; a server found gone gets its notice.

        The notice is recorded by :meth:`poll`, before JupyterHub's callbacks
        mark the server stopped, so no "Server not running" page is rendered
        between the two without it.
        """
        self._notice_armed = (self.exit_context(),)
        try:
            status: int | None = await super().poll_and_notify()  # type: ignore[misc]
        finally:
            self._notice_armed = None
        return status

    async def poll(self) -> int | None:
        """The spawner's poll; within :meth:`poll_and_notify`, a gone server's notice."""
        status: int | None = await super().poll()  # type: ignore[misc]
        armed, self._notice_armed = self._notice_armed, None
        if status is not None and armed is not None:
            try:
                text = await self.describe_exit(status, armed[0])
            except Exception as exc:  # the notice never breaks the poll
                self.log.warning("%s: why the server ended is unknown: %s", self.user.name, exc)
                text = notice()
            STOP_NOTICES.record(self.user.name, self.name or "", text)
            self.log.warning("%s: %s", self.user.name, text)
        elif armed is not None:
            self._notice_armed = armed
        return status


class ServerExitWatchMixin(StopNoticeMixin):
    """Mix in before a LocalProcessSpawner: notice the server's exit at once, keep why.

    ``start_polling`` (JupyterHub calls it after a spawn and for each server
    re-attached at hub start) also watches ``self.pid`` with a pidfd;
    ``stop_polling`` (called before a requested stop) ends the watch, so a
    stop the hub asked for is never reported as unexpected.
    """

    _exit_fd: int | None = None
    _exit_task: asyncio.Future[None] | None = None
    #: The server cgroup's counters when it was found gone (set by the cgroup mixin).
    _exit_stats: CgroupStats | None = None

    # attributes provided by the Spawner class this is mixed into
    pid: int
    _callbacks: list[Any]

    def start_polling(self) -> None:
        """Start JupyterHub's periodic poll, then watch the server's process."""
        super().start_polling()  # type: ignore[misc]
        self._watch_exit()

    def stop_polling(self) -> None:
        """End the watch, then JupyterHub's periodic poll."""
        self._unwatch_exit()
        super().stop_polling()  # type: ignore[misc]

    async def start(self) -> Any:
        """Forget the last stop's notice and counters, then start the server."""
        self._exit_stats = None
        return await super().start()

    async def describe_exit(self, status: int, context: Any) -> str:
        """The process's status and its cgroup's counters (:func:`describe_server_exit`)."""
        return describe_server_exit(status, self._exit_stats, self.mem_limit)

    def _watch_exit(self) -> None:
        self._unwatch_exit()
        if not self.pid:
            return
        try:
            fd = os.pidfd_open(self.pid)
        except (OSError, AttributeError) as exc:
            self.log.debug("no pidfd for server pid %s (%s): periodic poll only", self.pid, exc)
            return
        try:
            asyncio.get_running_loop().add_reader(fd, self._exited)
        except RuntimeError:  # no event loop here: the periodic poll only
            os.close(fd)
            return
        self._exit_fd = fd

    def _unwatch_exit(self) -> None:
        fd, self._exit_fd = self._exit_fd, None
        if fd is None:
            return
        with contextlib.suppress(RuntimeError, ValueError):
            asyncio.get_running_loop().remove_reader(fd)
        os.close(fd)

    def _exited(self) -> None:
        self._unwatch_exit()
        self._exit_task = asyncio.ensure_future(self._notify_exit())

    async def _notify_exit(self) -> None:
        """Run the stop callbacks once the poll sees the process gone (never during a spawn)."""
        if not self._callbacks:
            # the spawn has not finished (its callbacks are not registered
            # yet): the spawn itself fails, or the periodic poll sees it
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REAP_WAIT_S
        delay = 0.05
        while await self.poll() is None:
            if loop.time() > deadline:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        await self.poll_and_notify()


#: Seconds the hub waits for ``scontrol`` or ``systemctl`` when asking why a
#: server ended (a slurmctld that is down answers only after its own 15 s timeout).
QUERY_TIMEOUT_S = 5.0


async def read_command(argv: list[str], timeout_s: float = QUERY_TIMEOUT_S) -> str:
    """Return the standard output of ``argv``, or "" if it fails, is missing or is too slow."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
    except OSError:
        return ""
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return ""
    return out.decode(errors="replace") if proc.returncode == 0 else ""


class SlurmStopNoticeMixin(StopNoticeMixin):
    """Mix in before batchspawner's SlurmSpawner: why the job ended, from ``scontrol show job``.

    The job id is read before the poll (batchspawner's ``poll`` clears it
    when the job is gone); ``scontrol`` keeps an ended job for ``MinJobAge``
    seconds (300 by default), without slurmdbd.
    """

    job_id: str

    def exit_context(self) -> Any:
        """The job id of the server (batchspawner's ``job_id``), before the poll clears it."""
        return self.job_id

    async def describe_exit(self, status: int, context: Any) -> str:
        """The job's ``JobState`` and ``ExitCode`` in words (:func:`describe_slurm_exit`)."""
        if not context:
            return notice()
        fields = parse_key_values(await read_command(["scontrol", "show", "job", "-o", context]))
        return describe_slurm_exit(
            fields.get("JobState", ""), fields.get("ExitCode", ""), self.mem_limit
        )


class SystemdStopNoticeMixin(StopNoticeMixin):
    """Mix in before SystemdSpawner: why the unit ended, from ``systemctl show``.

    A transient unit that failed stays loaded with its ``Result`` until
    SystemdSpawner's next start resets it (``systemctl reset-failed``).
    """

    unit_name: str

    async def describe_exit(self, status: int, context: Any) -> str:
        """The unit's ``Result`` in words (:func:`describe_systemd_exit`)."""
        argv = ["systemctl", "show", self.unit_name]
        props = ("Result", "ExecMainCode", "ExecMainStatus")
        text = await read_command([*argv, *(f"--property={p}" for p in props)])
        return describe_systemd_exit(parse_key_values(text), self.mem_limit)
