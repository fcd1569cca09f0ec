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
  the cgroup spawners;
- one unit per server, a named server's carrying its name, and a unit left
  failed or stopping by a kill or a hub crash cleared before a start
  (:mod:`coursehub.spawn.systemdunits`).

Its settings stay in ``c.SystemdSpawner`` (traitlets applies a parent class's
section to a subclass). Reference: https://github.com/jupyterhub/systemdspawner.
"""

from __future__ import annotations

import asyncio
from typing import Any

from systemdspawner import SystemdSpawner

from coursehub.spawn.jobusage import JobUsageMixin
from coursehub.spawn.serverexit import SystemdStopNoticeMixin
from coursehub.spawn.systemdunits import plan_unit_clearing, server_unit_name


async def systemctl(*args: str) -> tuple[int, str]:
    """Run ``systemctl ARGS``; return its exit status and standard output (stripped)."""
    proc = await asyncio.create_subprocess_exec(
        "systemctl", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace").strip()


class CoursehubSystemdSpawner(JobUsageMixin, SystemdStopNoticeMixin, SystemdSpawner):
    """SystemdSpawner with the stop notice and the runner jobs' usage folder."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # load_state runs later and keeps the name a running server was started with
        self.unit_name = server_unit_name(
            self.unit_name_template, self.user.name, self.user.id, self.name or ""
        )

    async def clear_unit(self) -> None:
        """Free the unit's name: reset a failed unit, stop one still running or stopping."""
        _, state = await systemctl("show", "--property=ActiveState", "--value", self.unit_name)
        for args in plan_unit_clearing(self.unit_name, state):
            self.log.info("Unit %s is %s: systemctl %s", self.unit_name, state, " ".join(args))
            await systemctl(*args)

    async def start(self) -> Any:
        """Add the jobs' usage folder to the unit's environment, clear a leftover unit, start."""
        self.add_job_usage_env()
        await self.clear_unit()
        return await super().start()
