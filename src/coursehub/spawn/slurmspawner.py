"""batchspawner's SlurmSpawner with coursehub's notices, and the demo's (loaded by the hub).

:class:`CoursehubSlurmSpawner` (``coursehub hub config --spawner slurm``) is
SlurmSpawner plus the student's "stopped unexpectedly" notice when the hub's
poll finds the job ended, with why from the job's state (out of memory,
cancelled, node failure, time limit: :mod:`coursehub.spawn.serverexit`); a
job that is only COMPLETING counts as ended (its server has exited). The
hub's job watch (:mod:`coursehub.spawn.slurmwatch`: one ``squeue`` for all
servers every 2 s) runs that poll as soon as it sees a job ended, so that a
student whose server died can reload and start a new one within seconds;
the periodic poll (``poll_interval``) is the fallback. The job's environment
carries the runner jobs' usage folder (``COURSEHUB_USAGE_DIR``,
:class:`coursehub.spawn.jobusage.JobUsageMixin`): a ``coursehub run`` job
started in the server writes its records there, on storage the compute
nodes share with the hub (``usage_dir``, rendered by
``coursehub hub config --spawner slurm --usage-dir``).

The demo has no Unix account per student (every server runs as the hub's own
user, :mod:`coursehub.spawn.cgroupspawner` does the same for local
processes), while batchspawner's ``SlurmSpawner`` reads each user's home and
shell from the password database (``UserEnvMixin.user_env``,
``req_homedir``) and submits through ``sudo -E -u {username}``.
:class:`DemoSlurmSpawner` takes the home from ``home_dir_template`` instead,
creates it (0700) before submitting (``#SBATCH --chdir`` needs it), and
submits as the hub's user (``exec_prefix = ""``); its servers' jobs write
their usage to the hub's own folder, as the demo's local servers do
(``shares_hub_account``). Everything else is
SlurmSpawner's: the batch script, ``--cpus-per-task``/``--mem``/``--gres``
from the course profile (:mod:`coursehub.spawn.profiles`), ``scancel`` on
stop, and the job id kept in the hub's database (``get_state``/``load_state``).
Reference: https://github.com/jupyterhub/batchspawner (README, "SlurmSpawner").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from batchspawner import SlurmSpawner
from traitlets import Float, Unicode, default

from coursehub.spawn.jobusage import JobUsageMixin
from coursehub.spawn.serverexit import SlurmStopNoticeMixin
from coursehub.spawn.slurmwatch import SlurmJobWatchMixin

#: ``squeue`` states of a job whose server runs. batchspawner's default adds
#: COMPLETING, a job whose batch script (hence its server) has already ended:
#: a poll that met it waited one more ``poll_interval`` to see the server gone.
RUNNING_STATES_RE = r"^RUNNING"


#: Seconds between two checks, while waiting for a server to listen, that its job still runs.
JOB_CHECK_EVERY_S = 2.0


async def wait_listening(
    host: str,
    port: int,
    interval_s: float,
    timeout_s: float,
    still_running: Callable[[], Awaitable[bool]] | None = None,
) -> bool:
    """Return True once a TCP connection to ``host:port`` opens, else False.

    False after ``timeout_s`` seconds, or as soon as ``still_running`` (asked
    every :data:`JOB_CHECK_EVERY_S` seconds) says the server's job ended.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    next_check = loop.time() + JOB_CHECK_EVERY_S
    while True:
        try:
            _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
        except (OSError, TimeoutError):
            if loop.time() + interval_s > deadline:
                return False
            if still_running is not None and loop.time() >= next_check:
                if not await still_running():
                    return False
                next_check = loop.time() + JOB_CHECK_EVERY_S
            await asyncio.sleep(interval_s)
            continue
        writer.close()
        return True


class CoursehubSlurmSpawner(JobUsageMixin, SlurmJobWatchMixin, SlurmStopNoticeMixin, SlurmSpawner):
    """SlurmSpawner whose ended job the hub's watch notices, leaving a notice saying why."""

    @default("state_running_re")
    def _state_running_re_default(self) -> str:
        return RUNNING_STATES_RE

    listen_poll_interval = Float(
        0.1,
        help="Seconds between two checks that the started server listens on its port, before "
        "the start returns (0: return once the port is known, as batchspawner does).",
    ).tag(config=True)

    async def start(self) -> Any:
        """Submit the job with the jobs' usage folder in its environment; wait until it listens.

        batchspawner's start returns once ``batchspawner-singleuser`` has
        sent its port, before Jupyter Server has imported and listens
        (2-3 s); the hub then waits for it with a growing back-off (0.2 s
        doubling up to 5 s, JupyterHub ``utils.exponential_backoff``), which
        saw it 1.5-3.6 s late (benchmarks/bench_slurm_start.py). Here the
        port is tried every ``listen_poll_interval`` seconds (at most
        ``http_timeout``, and no longer once the job has ended), so the
        hub's first check finds the server up.
        """
        self.add_job_usage_env()
        ip, port = await super().start()
        if self.listen_poll_interval > 0:
            interval, timeout = self.listen_poll_interval, float(self.http_timeout)
            await wait_listening(ip, port, interval, timeout, self._job_running)
        return ip, port

    async def _job_running(self) -> bool:
        """Whether the server's job still runs (batchspawner's ``squeue`` query)."""
        from batchspawner import JobStatus

        return bool(await self.query_job_status() == JobStatus.RUNNING)


class DemoSlurmSpawner(CoursehubSlurmSpawner):
    """SlurmSpawner whose jobs run as the hub's user with homes from a template (demo only)."""

    #: Every server runs as the hub's account: its jobs write to the hub's own usage folder.
    shares_hub_account = True

    home_dir_template = Unicode(
        "/tmp/coursehub-slurm-homes/{username}",
        help="Each server's home; {username} is the hub user's name.",
    ).tag(config=True)

    @default("exec_prefix")
    def _exec_prefix_default(self) -> str:
        return ""  # sbatch, squeue and scancel run as the hub's user

    @property
    def home_dir(self) -> str:
        """The server's home directory (``home_dir_template`` for this user)."""
        return str(self.home_dir_template.format(username=self.user.name))

    @default("req_homedir")
    def _req_homedir_default(self) -> str:
        return self.home_dir

    def user_env(self, env: dict[str, str]) -> dict[str, str]:
        """Set ``HOME`` (not the password database's entry, which the demo users lack)."""
        env["HOME"] = self.home_dir
        return env

    def get_args(self) -> list[str]:
        """The server's arguments, plus ``--allow-root`` when the hub (hence the job) is root."""
        args: list[str] = list(super().get_args())
        if os.geteuid() == 0 and "--allow-root" not in args:
            args.append("--allow-root")
        return args

    async def start(self) -> Any:
        """Create the home directory (0700), then submit the job (SlurmSpawner.start)."""
        Path(self.home_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        return await super().start()
