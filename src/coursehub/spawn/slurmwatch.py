"""A server whose Slurm job ended is noticed within seconds, by one ``squeue`` for all servers.

batchspawner's ``poll`` asks Slurm about one job (``squeue -h -j <id>``,
``BatchSpawnerBase.query_job_status``), and JupyterHub runs it for each server
every ``Spawner.poll_interval`` (``Spawner.start_polling``). Until that poll
finds the job ended, the server's route stays in the proxy: a reload of
``/user/<name>/lab`` answers 503 and Start leads back to it
(jupyterhub/systemdspawner#87). A poll short enough for a restart within
10 s would cost one ``squeue`` per server every second or two: 100 to 200
calls a second to slurmctld for a class of 200.

:class:`SlurmJobWatch` asks once for all the hub's running servers instead,
every :data:`WATCH_INTERVAL_S` seconds (``squeue --noheader --states=all
--jobs=<id>,<id>,... --format="%i %T"``, Slurm's ``squeue(1)``): a job it
finds in a state that batchspawner counts as ended (neither
``state_running_re`` nor ``state_pending_re``) gets its spawner's
``poll_and_notify``, JupyterHub's poll and stop callbacks (batchspawner's
own query confirms). The route is then removed, the next reload shows
JupyterHub's "Server not running" page with the notice of
:class:`coursehub.spawn.serverexit.SlurmStopNoticeMixin`, and Start submits
a new job. A job the query does not list (purged ``MinJobAge`` seconds after
it ended, or hidden from a hub user that is not a Slurm operator by
``PrivateData=jobs``) is left to the periodic poll, as is every job when
``squeue`` fails.

The query runs as the hub's own user, without batchspawner's
``exec_prefix`` (``sudo -E -u {username}``): it is one call for all
students.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from traitlets import Float, HasTraits

from coursehub.spawn.serverexit import read_command

#: Seconds between two queries of the watch: a dead server is noticed after
#: half of it on average, one query per interval whatever the number of servers.
WATCH_INTERVAL_S = 2.0
#: The watch's query, before ``--jobs=<id>,...`` (``squeue(1)``: ``%i`` job id,
#: ``%T`` long state; ``--states=all`` lists ended jobs still in slurmctld's memory).
SQUEUE_ARGV = ("squeue", "--noheader", "--states=all", "--format=%i %T")

#: One line of that output: a job id (digits, an array task's ``_N``) and a state.
JOB_LINE_RE = re.compile(r"^(\d[\w+]*)\s+([A-Z_]+)$")

log = logging.getLogger(__name__)


def parse_job_states(text: str) -> dict[str, str]:
    """Return ``{job_id: state}`` from the watch's ``squeue`` output (pure).

    Its lines are ``"<id> <STATE>"``; other lines (an error message) are skipped.
    """
    states = {}
    for line in text.splitlines():
        match = JOB_LINE_RE.match(line.strip())
        if match:
            states[match[1]] = match[2]
    return states


def ended_job_ids(
    states: Mapping[str, str], job_ids: Iterable[str], running_re: str, pending_re: str
) -> list[str]:
    """Return those of ``job_ids`` whose listed state batchspawner's poll counts as ended (pure).

    batchspawner's ``poll`` (``BatchSpawnerBase.poll``) reports a job gone
    when its state matches neither ``state_running_re`` nor
    ``state_pending_re``; a job that ``states`` does not list is not
    reported (Slurm may hide it, or has forgotten it).
    """
    ended = []
    for job_id in job_ids:
        state = states.get(job_id)
        if state is None:
            continue
        if re.search(running_re, state) or re.search(pending_re, state):
            continue
        ended.append(job_id)
    return ended


class SlurmJobWatch:
    """The hub process's watch over its servers' Slurm jobs: one ``squeue`` per interval.

    Spawners are added by ``start_polling`` and removed by ``stop_polling``
    (:class:`SlurmJobWatchMixin`); the watch runs while it has any. Each
    spawner needs ``job_id``, ``state_running_re``, ``state_pending_re``
    (batchspawner's ``BatchSpawnerRegexStates``) and ``job_ended()``.
    """

    def __init__(
        self,
        interval_s: float = WATCH_INTERVAL_S,
        query: Callable[[list[str]], Awaitable[str]] = read_command,
    ) -> None:
        self.interval_s = interval_s
        self._query = query
        self._spawners: dict[Any, None] = {}  # in the order added
        self._task: asyncio.Task[None] | None = None

    def add(self, spawner: Any, interval_s: float | None = None) -> None:
        """Watch ``spawner``'s job (every ``interval_s`` seconds, when given); start the watch."""
        if interval_s is not None:
            self.interval_s = interval_s
        self._spawners[spawner] = None
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def discard(self, spawner: Any) -> None:
        """Stop watching ``spawner``'s job (the watch ends with its last spawner)."""
        self._spawners.pop(spawner, None)

    def watched(self) -> list[Any]:
        """The spawners watched now."""
        return list(self._spawners)

    async def check(self) -> list[Any]:
        """Query Slurm once; call ``job_ended()`` of each spawner whose job ended; return them."""
        by_job = {s.job_id: s for s in list(self._spawners) if s.job_id}
        if not by_job:
            return []
        text = await self._query([*SQUEUE_ARGV, "--jobs=" + ",".join(sorted(by_job))])
        states = parse_job_states(text)
        ended = []
        for job_id, spawner in by_job.items():
            found = ended_job_ids(
                states, [job_id], spawner.state_running_re, spawner.state_pending_re
            )
            if found and spawner in self._spawners:
                ended.append(spawner)
                spawner.job_ended()
        return ended

    async def _run(self) -> None:
        while self._spawners:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except Exception:  # the watch never stops on one bad query
                log.exception("the Slurm job watch failed; the periodic poll goes on")
        self._task = None


#: The watch of this hub process.
SLURM_JOB_WATCH = SlurmJobWatch()


class SlurmJobWatchMixin(HasTraits):
    """Mix in before batchspawner's SlurmSpawner: the hub's watch notices the job's end.

    ``start_polling`` (JupyterHub calls it after a spawn and for each server
    re-attached at hub start, ``user.py`` and ``app.py``) adds the server to
    :data:`SLURM_JOB_WATCH`; ``stop_polling`` (called before a stop the hub
    asked for, and by ``poll_and_notify`` once the server is found gone)
    removes it. The periodic poll (``poll_interval``) stays as the fallback.
    """

    job_watch_interval = Float(
        WATCH_INTERVAL_S,
        help="Seconds between the hub's queries of all its servers' jobs (one squeue "
        "for all); 0: no watch, the periodic poll (poll_interval) only.",
    ).tag(config=True)

    # attributes provided by the Spawner class this is mixed into
    log: Any
    pending: str | None
    _callbacks: list[Any]
    _notice_armed: tuple[Any] | None

    _job_check: asyncio.Future[None] | None = None

    def start_polling(self) -> None:
        """Start JupyterHub's periodic poll, then watch the server's job."""
        super().start_polling()  # type: ignore[misc]
        if self.job_watch_interval > 0:
            SLURM_JOB_WATCH.add(self, self.job_watch_interval)

    def stop_polling(self) -> None:
        """Stop watching the job, then JupyterHub's periodic poll."""
        SLURM_JOB_WATCH.discard(self)
        super().stop_polling()  # type: ignore[misc]

    def job_ended(self) -> None:
        """The watch saw the job ended: run ``poll_and_notify`` once, in the background.

        Not while a spawn or stop is pending (JupyterHub's own path then
        polls), not before the spawn registered its stop callbacks, and not
        while a poll of this server already runs.
        """
        if self.pending or not self._callbacks or getattr(self, "_notice_armed", None):
            return
        if self._job_check is not None and not self._job_check.done():
            return
        self._job_check = asyncio.ensure_future(self._check_job())

    async def _check_job(self) -> None:
        try:
            await self.poll_and_notify()  # type: ignore[attr-defined]
        except Exception as exc:  # the periodic poll tries again
            self.log.warning("poll after the job watch failed: %s", exc)
