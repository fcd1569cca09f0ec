"""The runner jobs' usage folder in the environment of a server the hub does not sample.

SystemdSpawner's units and batchspawner's Slurm jobs are not sampled by the
hub (the cgroup spawners open their servers' units themselves,
:func:`coursehub.meter.hubhook.open_server_usage`), but the ``coursehub run``
jobs started in them write their own records where ``COURSEHUB_USAGE_DIR``
says (:mod:`coursehub.runner.job`). :class:`JobUsageMixin` gives the server
that variable and ``COURSEHUB_COURSE_ID`` at each start
(:func:`coursehub.meter.hubhook.job_usage_env`): the jobs' folder
``<usage_dir>-jobs`` (mode 1733, :func:`coursehub.meter.sampler.ensure_job_folder`),
or ``usage_dir`` itself where every server runs as the hub's own account
(``shares_hub_account``, the Slurm demo's).

A Slurm job runs on a compute node: ``usage_dir`` must then be a folder that
the hub and every node mount at the same path (shared storage, as the homes),
which ``coursehub hub config --spawner slurm --usage-dir`` renders; the
node-local default ``/run/coursehub/usage-<hub id>`` reaches only the jobs
that run on the hub's own host.
"""

from __future__ import annotations

from pathlib import Path

from traitlets import HasTraits, Unicode, default

from coursehub.meter.hubhook import hub_usage_dir, job_usage_env
from coursehub.spawn.identity import default_runtime_dir, hub_id_from_config


class JobUsageMixin(HasTraits):
    """Mix in before a spawner: the runner jobs' usage folder in the server's environment.

    Call :meth:`add_job_usage_env` in ``start`` before the spawner's own
    ``start`` reads ``self.environment``.
    """

    runtime_dir = Unicode(
        help="The hub's runtime folder; the hub's usage folder is <runtime_dir>/usage-<hub id> "
        "unless usage_dir or $COURSEHUB_USAGE_DIR of the hub says otherwise."
    ).tag(config=True)
    hub_id = Unicode(
        help="This hub's id in host-wide names (default: a hash of JupyterHub.db_url, "
        "see coursehub.spawn.identity)."
    ).tag(config=True)
    usage_dir = Unicode(
        help="The hub's usage folder; the runner jobs of its servers write to <usage_dir>-jobs "
        "(default: $COURSEHUB_USAGE_DIR of the hub, else <runtime_dir>/usage-<hub id>). "
        "Slurm: a folder the hub and every compute node mount at the same path."
    ).tag(config=True)

    @default("hub_id")
    def _default_hub_id(self) -> str:
        return hub_id_from_config(self.config)  # type: ignore[attr-defined]

    @default("runtime_dir")
    def _default_runtime_dir(self) -> str:
        return default_runtime_dir()

    @default("usage_dir")
    def _default_usage_dir(self) -> str:
        return str(hub_usage_dir(self.runtime_dir, self.hub_id))

    def add_job_usage_env(self) -> None:
        """Add ``COURSEHUB_USAGE_DIR`` and ``COURSEHUB_COURSE_ID`` to ``self.environment``.

        Never raises: a jobs' folder out of the students' reach leaves the
        variable out and the hub log says so (:func:`job_usage_env`).
        """
        jobs_env = job_usage_env(self, Path(self.usage_dir))
        environment: dict[str, str] = dict(self.environment)  # type: ignore[has-type]
        self.environment = {**environment, **jobs_env}
