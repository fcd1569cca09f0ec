"""Usage reaches the catalog on a schedule, read by one ingester per hub.

The report: nothing ran ``coursehub usage ingest`` unless someone wrote a
cron line, so in the demo every Usage page said "No usage recorded yet". The
rendered local hub configuration (the demo's too) now starts
``coursehub usage ingest --every S`` as a hub-managed service; here that
command runs as a real process against a real catalog, and a second ingest
of the same folder is refused while it runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select

from coursehub.catalog.db import make_engine
from coursehub.catalog.models.usage import UsageUnit
from coursehub.hub.render import USAGE_INGEST_EVERY_S, HubSettings, render_hub_config
from coursehub.meter.journal import USAGE_DIR_VAR, append_record, hub_usage_folder
from coursehub.meter.records import UsageRecord
from coursehub.spawn.identity import default_runtime_dir, hub_id_for_db_url
from coursehub.usage.ingestloop import LOCK_NAME
from helpers import wait_until
from test_hub_config import load_python_config


def server_record(unit: str, at: float) -> UsageRecord:
    return UsageRecord("close", unit, "server", "ada", "mlmeca-2026", at, at - 60, 30.0, 2**20)


def catalog_units(database_url: str) -> list[str]:
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            return sorted(connection.scalars(select(UsageUnit.unit_id)))
    finally:
        engine.dispose()


def ingest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "coursehub", "usage", "ingest", *args]


def test_a_scheduled_ingest_reads_new_records_and_no_second_ingest_runs_beside_it(
    database_url, tmp_path
):
    folder = tmp_path / "run" / "usage-hubA"  # not made yet: the hub has started no server
    env = {**os.environ, USAGE_DIR_VAR: str(folder), "COURSEHUB_DATABASE_URL": database_url}
    scheduled = subprocess.Popen(
        ingest_command("--every", "0.2"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: (folder / LOCK_NAME).exists(), what="the ingester's lock")
        now = time.time()
        append_record(folder, "hubA", server_record("server:hubA:ada::1", now))
        wait_until(lambda: catalog_units(database_url), what="the first record in the catalog")
        append_record(folder, "hubA", server_record("server:hubA:ada::2", now + 1))
        wait_until(lambda: len(catalog_units(database_url)) == 2, what="the record added later")

        second = subprocess.run(
            ingest_command(str(folder), "--database-url", database_url),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert second.returncode == 2
        assert "another `coursehub usage ingest` reads" in second.stderr
        assert f"pid {scheduled.pid}" in second.stderr
        assert scheduled.poll() is None
    finally:
        scheduled.send_signal(signal.SIGTERM)  # the hub stopping its services
        out, err = scheduled.communicate(timeout=60)
    assert scheduled.returncode == 0, err
    assert "1 usage records read" in out
    assert catalog_units(database_url) == ["server:hubA:ada::1", "server:hubA:ada::2"]
    assert folder.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("every", ["0", "-5"])
def test_a_schedule_that_is_not_positive_is_refused(tmp_path, every):
    done = subprocess.run(
        ingest_command(str(tmp_path), "--every", every, "--database-url", "sqlite://"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "--every must be more than 0 seconds" in done.stderr


def test_the_local_hub_config_runs_one_ingester_of_its_own_usage_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(USAGE_DIR_VAR, raising=False)
    data_dir = "/srv/jupyterhub"
    settings = replace(HubSettings(), kind="local", data_dir=data_dir)
    config = load_python_config(render_hub_config(settings), tmp_path, monkeypatch)
    services = {s["name"]: s for s in config.JupyterHub.services}
    ingest = services["usage-ingest"]
    bound = [sys.executable, "-m", "coursehub.spawn.hubservice", str(os.getpid()), "--"]
    assert ingest["command"] == [
        *bound,
        *ingest_command("--every", str(USAGE_INGEST_EVERY_S)),
    ]
    hub_id = hub_id_for_db_url(f"sqlite:///{data_dir}/jupyterhub.sqlite")
    own = hub_usage_folder(default_runtime_dir(), hub_id)
    assert Path(ingest["environment"][USAGE_DIR_VAR]) == own
    assert ingest["environment"]["COURSEHUB_DATABASE_URL"] == settings.database_url
    # systemd: the deployed host's timer reads the folder (coursehub deploy), not the hub
    assert "usage-ingest" not in render_hub_config(replace(HubSettings(), kind="systemd"))
    # slurm: the servers' runner jobs write to <usage dir>-jobs, which the hub's ingester reads
    slurm = replace(HubSettings(), kind="slurm", extra={"usage_dir": "/shared/usage"})
    assert '"name": "usage-ingest"' in render_hub_config(slurm)
