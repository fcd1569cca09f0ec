"""Runner jobs in a SystemdSpawner server are metered: the unit gets the jobs' usage folder.

Before, only the cgroup spawners gave a server ``COURSEHUB_USAGE_DIR``; under
``coursehub hub config --spawner systemd`` the ``coursehub run`` jobs a
student started in a server wrote no usage, with no warning anywhere.
"""

from __future__ import annotations

import asyncio
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from coursehub.meter.hubhook import job_usage_env
from coursehub.meter.journal import USAGE_DIR_VAR
from coursehub.meter.sampler import COURSE_VAR, JOB_FOLDER_MODE

pytest.importorskip("systemdspawner", reason="jupyterhub-systemdspawner is not installed")


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A hub runtime folder whose ancestors every user may search (as /run/coursehub)."""
    folder = Path(tempfile.mkdtemp(prefix="coursehub-run-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _spawner(**extra: Any) -> SimpleNamespace:
    return SimpleNamespace(
        user=SimpleNamespace(name="ann"), user_options={"course": "ml-2026"}, **extra
    )


def test_the_jobs_folder_and_course_reach_the_servers_environment(runtime_dir, monkeypatch):
    monkeypatch.delenv(USAGE_DIR_VAR, raising=False)
    env = job_usage_env(_spawner(), runtime_dir / "usage")
    assert env == {COURSE_VAR: "ml-2026", USAGE_DIR_VAR: str(runtime_dir / "usage-jobs")}
    assert stat.S_IMODE((runtime_dir / "usage-jobs").stat().st_mode) == JOB_FOLDER_MODE


def test_a_folder_out_of_reach_leaves_the_jobs_unmetered_not_the_server_down(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    assert job_usage_env(_spawner(), tmp_path / "file" / "usage") == {COURSE_VAR: "ml-2026"}


def test_the_systemd_spawner_starts_its_unit_with_the_jobs_folder(runtime_dir, monkeypatch):
    from systemdspawner import SystemdSpawner

    from test_spawner_classes import make_spawner

    monkeypatch.delenv(USAGE_DIR_VAR, raising=False)
    seen: dict[str, str] = {}

    async def start(self: Any) -> tuple[str, int]:
        seen.update(self.environment)
        return ("127.0.0.1", 8888)

    monkeypatch.setattr(SystemdSpawner, "start", start)
    spawner = make_spawner("systemd")
    spawner.runtime_dir = str(runtime_dir)
    spawner.hub_id = "hubtest"
    spawner.user_options = {"course": "ml-2026"}
    spawner.environment = {"KEEP": "1"}
    asyncio.run(spawner.start())
    assert seen["KEEP"] == "1"
    assert seen[USAGE_DIR_VAR] == str(runtime_dir / "usage-hubtest-jobs")
    assert seen[COURSE_VAR] == "ml-2026"
