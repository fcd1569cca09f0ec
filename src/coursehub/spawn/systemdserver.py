"""SystemdSpawner with coursehub's stop notice and usage folder (``--spawner systemd``).

:class:`CoursehubSystemdSpawner` is jupyterhub-systemdspawner's
``SystemdSpawner`` plus:

- the student's "stopped unexpectedly" notice when the hub's poll finds the
  unit ended, with why from the unit's ``Result`` (out of memory, killed by
  signal N: :class:`coursehub.spawn.serverexit.SystemdStopNoticeMixin`);
- the runner jobs' usage folder in the unit's environment
  (``COURSEHUB_USAGE_DIR`` and ``COURSEHUB_COURSE_ID``,
  :class:`coursehub.spawn.jobusage.JobUsageMixin`), so that the
  ``coursehub run`` jobs a student starts in the server are metered as on
  the cgroup spawners.

Its settings stay in ``c.SystemdSpawner`` (traitlets applies a parent class's
section to a subclass). Reference: https://github.com/jupyterhub/systemdspawner.
"""

from __future__ import annotations

from typing import Any

from systemdspawner import SystemdSpawner

from coursehub.spawn.jobusage import JobUsageMixin
from coursehub.spawn.serverexit import SystemdStopNoticeMixin


class CoursehubSystemdSpawner(JobUsageMixin, SystemdStopNoticeMixin, SystemdSpawner):
    """SystemdSpawner with the stop notice and the runner jobs' usage folder."""

    async def start(self) -> Any:
        """Add the jobs' usage folder to the unit's environment, then start the unit."""
        self.add_job_usage_env()
        return await super().start()
