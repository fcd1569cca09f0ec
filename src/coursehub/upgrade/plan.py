"""The plan of ``coursehub upgrade``: every step decided first, printed, then carried out.

Steps, in this order (each one only once the one before it succeeded):

1. back up (:mod:`coursehub.backup`) into the install's backups folder;
2. migrate the catalog to the newest revision (Alembic);
3. re-render the install's files (:mod:`coursehub.deploy`), with the choices
   it was made with (:func:`coursehub.upgrade.install.read_install`);
4. ``systemctl daemon-reload`` when a unit file changed, then
   ``systemctl try-restart`` the hub and the course app (systemctl(1):
   restarts a unit only if it runs).

Students' servers are units of their own and the hub leaves them running
(:func:`coursehub.upgrade.install.servers_kept`); the restarted hub polls each
spawner from its saved state (``Spawner.load_state``, ``Spawner.poll``) and
takes the running ones back. Kernels and runner jobs live in the servers' units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from coursehub.backup.archive import default_archive_name
from coursehub.deploy.install import DeployOptions, DeployPlan, make_plan, render_plan
from coursehub.deploy.layout import DeployLayout
from coursehub.errors import UsageError
from coursehub.upgrade.install import Install, read_install, servers_kept

#: The units an upgrade restarts, in this order (the course app asks the hub at start).
RESTARTED = ("coursehub-hub.service", "coursehub-web.service")


@dataclass
class UpgradePlan:
    """The steps of one upgrade.

    Attributes
    ----------
    archive : pathlib.Path
        The backup to write first (on disk, below the root).
    database_url : str
        The catalog's URL as used here (with its password).
    migrate_from, migrate_to : str or None
        The catalog's revision and the newest; equal: nothing to migrate.
    deploy : DeployPlan
        The files to re-render (:func:`coursehub.deploy.install.make_plan`).
    options : DeployOptions
        The install's choices, as ``coursehub deploy`` takes them.
    environ : dict of str to str
        The units' environment (paths below the root), which the backup reads.
    restart : tuple of str
        The units to restart; empty for an install below another root.
    """

    archive: Path
    database_url: str
    migrate_from: str | None
    migrate_to: str
    deploy: DeployPlan
    options: DeployOptions
    environ: dict[str, str]
    restart: tuple[str, ...] = RESTARTED
    notes: list[str] = field(default_factory=list)

    @property
    def reload_units(self) -> bool:
        """Whether a unit file changes (``systemctl daemon-reload`` is needed)."""
        return any(c.spec.path.suffix in (".service", ".timer") for c in self.deploy.files)


def deploy_options(layout: DeployLayout, install: Install, python: str) -> DeployOptions:
    """Return the options of ``coursehub deploy`` that re-render ``install`` (pure)."""
    return DeployOptions(
        layout=layout,
        python=python,
        proxy=install.proxy,
        database=install.database,
        tls_cert=install.tls_cert,
        tls_key=install.tls_key,
        port=install.port,
    )


def make_upgrade_plan(layout: DeployLayout, python: str, now: datetime) -> UpgradePlan:
    """Return the upgrade of the install below ``layout.root`` (reads, writes nothing).

    Raises
    ------
    UsageError
        If there is no install there, or if a restart of its hub would stop
        students' servers (the message says why).
    """
    from coursehub.deploy import host

    install = read_install(layout)
    reasons = servers_kept(install.hub_config)
    if reasons:
        raise UsageError(
            f"{layout.on_disk(layout.hub_config)}: restarting the hub would stop students' "
            f"servers: {'; '.join(reasons)}"
        )
    options = deploy_options(layout, install, python)
    deploy = make_plan(options)
    current, head = host.pending_migration(deploy.database_url)
    deploy.migrate_from = None  # migrated before any file is written (step 2)
    archive = layout.on_disk(layout.backups_dir) / default_archive_name(now)
    on_host = layout.root == Path("/")
    plan = UpgradePlan(
        archive, deploy.database_url, current, head, deploy, options, install.environ
    )
    if not on_host:
        plan.restart = ()
        plan.notes.append(f"an install below {layout.root}: no unit is restarted")
    return plan


def render_upgrade_plan(plan: UpgradePlan) -> str:
    """Return the plan as numbered steps for a person (pure)."""
    migrate = (
        f"migrate the catalog from revision {plan.migrate_from or '(empty)'} to {plan.migrate_to}"
        if plan.migrate_from != plan.migrate_to
        else f"the catalog is at the newest revision ({plan.migrate_to}): nothing to migrate"
    )
    files = render_plan(plan.deploy, plan.options.layout.root).splitlines()
    steps = [f"1. back up into {plan.archive}", f"2. {migrate}", "3. re-render the install:"]
    steps += [f"   {line}" for line in files]
    if plan.restart:
        reload = "systemctl daemon-reload, then " if plan.reload_units else ""
        steps.append(
            f"4. {reload}systemctl try-restart {' '.join(plan.restart)} "
            "(students' servers, kernels and runner jobs keep running)"
        )
    else:
        steps.append("4. restart nothing")
    steps += [f"note: {note}" for note in plan.notes]
    return "\n".join(steps)
