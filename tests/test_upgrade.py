"""``coursehub upgrade`` of an install below a temporary root: plan, order of steps, failures."""

from __future__ import annotations

import os
import sqlite3
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coursehub.catalog.connect import open_catalog
from coursehub.catalog.errors import SchemaError
from coursehub.catalog.schema import head_revision, upgrade_database
from coursehub.cli import main
from coursehub.deploy.layout import DeployLayout
from coursehub.errors import UsageError
from coursehub.upgrade import apply as upgrade_apply
from coursehub.upgrade.apply import UpgradeError, apply_upgrade, restart
from coursehub.upgrade.install import KEEP_SERVERS, env_on_disk, parse_port, servers_kept
from coursehub.upgrade.plan import RESTARTED, make_upgrade_plan, render_upgrade_plan

PROXY = Path(sys.executable).parent.parent / "node/node_modules/.bin/configurable-http-proxy"
CATALOG = Path("var/lib/coursehub/catalog.sqlite")
HUB_UNIT = Path("etc/systemd/system/coursehub-hub.service")
OLDER = "0012"

pytestmark = pytest.mark.skipif(
    not os.access(PROXY, os.X_OK), reason=f"configurable-http-proxy missing ({PROXY}; make setup)"
)


@pytest.fixture
def installed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An install below ``tmp_path`` whose catalog is one revision behind, a unit file edited."""
    argv = ["deploy", "--root", str(tmp_path), "--proxy", str(PROXY), "--hostname", "hub.test"]
    assert main(argv) == 0
    (tmp_path / CATALOG).unlink()
    with open_catalog(f"sqlite:///{tmp_path / CATALOG}", check_schema=False) as engine:
        upgrade_database(engine, OLDER)
    unit = tmp_path / HUB_UNIT
    unit.write_text(unit.read_text().replace("RestartSec=5", "RestartSec=1"))
    capsys.readouterr()
    return tmp_path


def _revision(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("SELECT version_num FROM alembic_version").fetchone()[0])


def _plan(root: Path):
    return make_upgrade_plan(DeployLayout(root=root), sys.executable, datetime.now(UTC))


def test_a_dry_run_prints_the_four_steps_and_changes_nothing(installed, capsys):
    unit = (installed / HUB_UNIT).read_text()
    assert main(["upgrade", "--root", str(installed), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.index("1. back up into") < out.index("2. migrate the catalog from revision 0012")
    assert f"to {head_revision()}" in out
    assert f"update {installed}/etc/systemd/system/coursehub-hub.service (0644) (content)" in out
    assert "4. restart nothing" in out
    assert list((installed / "var/lib/coursehub/backups").iterdir()) == []
    assert _revision(installed / CATALOG) == OLDER
    assert (installed / HUB_UNIT).read_text() == unit


def test_an_upgrade_backs_up_first_then_migrates_and_rewrites(installed, capsys):
    assert main(["upgrade", "--root", str(installed), "--hostname", "hub.test"]) == 0
    out = capsys.readouterr().out
    assert f"migrated the catalog from {OLDER} to {head_revision()}" in out
    assert _revision(installed / CATALOG) == head_revision()
    assert "RestartSec=5" in (installed / HUB_UNIT).read_text()
    (archive,) = (installed / "var/lib/coursehub/backups").iterdir()
    with tarfile.open(archive) as tar:  # the catalog as it was before the migration
        member = next(m for m in tar.getmembers() if m.name.startswith("data/catalog"))
        tar.extract(member, installed / "x", filter="data")
    assert _revision(installed / "x" / member.name) == OLDER
    record = (installed / "var/lib/coursehub/last-backup.json").read_text()
    assert str(archive) in record  # the install's data directory, not this process's
    assert main(["upgrade", "--root", str(installed), "--dry-run"]) == 0
    again = capsys.readouterr().out
    assert "nothing to migrate" in again and "nothing to change" in again


def test_a_failed_migration_stops_before_any_file_or_restart_and_names_the_backup(
    installed, monkeypatch
):
    def broken(url: str) -> str:
        raise SchemaError("migration 0013 failed: no such table: courses")

    monkeypatch.setattr("coursehub.deploy.host.migrate", broken)
    unit = (installed / HUB_UNIT).read_text()
    plan = _plan(installed)
    plan.restart = RESTARTED
    calls: list[list[str]] = []
    with pytest.raises(UpgradeError) as caught:
        apply_upgrade(plan, "hub.test", systemctl=lambda args: calls.append(list(args)))
    message = str(caught.value)
    assert "step 2" in message and "no such table: courses" in message
    assert f"coursehub restore {plan.archive} --force" in message
    assert plan.archive.is_file()
    assert (installed / HUB_UNIT).read_text() == unit
    assert calls == []


def test_a_failed_backup_changes_nothing(installed):
    plan = _plan(installed)
    plan.archive.write_text("an archive of the same name")
    with pytest.raises(UpgradeError, match=r"step 1, backup, failed: .* exists already"):
        apply_upgrade(plan, "hub.test", systemctl=lambda args: None)
    assert _revision(installed / CATALOG) == OLDER


def test_the_units_are_reloaded_then_restarted_hub_first(installed):
    plan = _plan(installed)
    plan.restart = RESTARTED
    calls: list[list[str]] = []
    lines = restart(plan, lambda args: calls.append(list(args)))
    assert calls == [
        ["daemon-reload"],
        ["try-restart", "coursehub-hub.service"],
        ["try-restart", "coursehub-web.service"],
    ]
    assert lines[0] == "reloaded the unit files"


def test_a_failed_restart_names_the_unit_and_its_journal(installed):
    plan = _plan(installed)
    plan.restart = RESTARTED
    calls: list[list[str]] = []

    def systemctl(args):
        calls.append(list(args))
        if args[-1] == "coursehub-hub.service":
            raise UpgradeError("systemctl try-restart coursehub-hub.service failed: timeout")

    with pytest.raises(UpgradeError, match=r"journalctl -u coursehub-hub\.service"):
        restart(plan, systemctl)
    assert ["try-restart", "coursehub-web.service"] not in calls


def test_a_hub_that_would_stop_servers_is_not_upgraded(installed, capsys):
    config = installed / "etc/coursehub/jupyterhub_config.py"
    config.write_text(
        config.read_text().replace(KEEP_SERVERS, "c.JupyterHub.cleanup_servers = True")
    )
    assert main(["upgrade", "--root", str(installed), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "restarting the hub would stop students' servers" in err and "cleanup_servers" in err


def test_no_install_below_the_root_is_said(tmp_path, capsys):
    assert main(["upgrade", "--root", str(tmp_path), "--dry-run"]) == 2
    assert "run `coursehub deploy` first" in capsys.readouterr().err


def test_servers_kept_needs_the_systemd_spawner_and_no_cleanup():
    good = f'{KEEP_SERVERS}\nc.JupyterHub.spawner_class = "{upgrade_apply.__name__}"\n'
    assert "not the systemd spawner" in servers_kept(good)[0]
    systemd = good.replace(
        upgrade_apply.__name__, "coursehub.spawn.systemdserver.CoursehubSystemdSpawner"
    )
    assert servers_kept(systemd) == []


def test_the_units_environment_is_mapped_below_the_root():
    layout = DeployLayout(root=Path("/tmp/r"))
    env = {
        "COURSEHUB_DATA_DIR": "/var/lib/coursehub",
        "COURSEHUB_DATABASE_URL": "sqlite:////var/lib/coursehub/catalog.sqlite",
        "COURSEHUB_SERVICE_TOKEN": "abc",
    }
    assert env_on_disk(layout, env) == {
        "COURSEHUB_DATA_DIR": "/tmp/r/var/lib/coursehub",
        "COURSEHUB_DATABASE_URL": "sqlite:////tmp/r/var/lib/coursehub/catalog.sqlite",
        "COURSEHUB_SERVICE_TOKEN": "abc",
    }


@pytest.mark.parametrize(
    ("url", "port"), [("https://:443", 443), ("https://hub.example:8443/", 8443)]
)
def test_the_port_is_read_from_the_bind_url(url, port):
    assert parse_port(url, Path("c.py")) == port


def test_a_bind_url_without_a_port_is_named():
    with pytest.raises(
        UsageError, match=r"c.py: c.JupyterHub.bind_url 'https://hub' names no port"
    ):
        parse_port("https://hub", Path("c.py"))


def test_the_plan_renders_without_a_migration_when_at_the_newest(installed):
    plan = _plan(installed)
    plan.migrate_from = plan.migrate_to
    assert "nothing to migrate" in render_upgrade_plan(plan)
