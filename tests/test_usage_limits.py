"""Inside a student's server the resource display shows the course's limits, not the host's.

It also shows the home's disk (used / size, flashing near the end): the
student's home quota where the hub set one (``COURSEHUB_HOME_QUOTA_BYTES``,
:mod:`coursehub.spawn.homedisk`) or the file system enforces one, else the
figures of ``statvfs`` on the home; measured below on ext4 and btrfs.

jupyter-resource-usage reads ``MEM_LIMIT`` and ``CPU_LIMIT``; JupyterHub's
``Spawner.get_env`` sets them from ``mem_limit`` and ``cpu_limit``, which
the course profile sets (:class:`coursehub.spawn.spawner.CourseProfiles`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import requests

from coursehub.contract import make_profile
from coursehub.contract import profile_to_json as render_profile
from coursehub.hub.render import DISK_WARNING_FRACTION, busy_server_arg, server_args
from coursehub.spawn.homedisk import parse_quota_env, plan_disk_metrics, read_home
from coursehub.spawn.homelimit import QUOTA_ENV
from helpers import free_port, local_spawner, wait_until
from loopfs import fill, loop_mount

M = 2**20
COURSE = make_profile("m2-2cpu-3g", cpu_limit=2, mem_limit="3G", n_threads=2)


def _course_env(tmp_path) -> dict[str, str]:
    from coursehub.spawn.spawner import CourseProfiles

    group = ("nbgrader-m2", {"profile": render_profile(COURSE)})
    # the hub model get_env reads (JupyterHub gives the real one at spawn)
    hub = SimpleNamespace(public_host="", api_url="http://127.0.0.1:8081/hub/api", base_url="/hub/")
    spawner = local_spawner([group], name="chtestlim", hub=hub)
    CourseProfiles("local", gpu_ids=[], state_path=tmp_path / "gpus.json").apply(spawner, {})
    env = spawner.get_env()
    return {key: env[key] for key in ("MEM_LIMIT", "CPU_LIMIT")}


def test_the_server_environment_carries_the_courses_limits(tmp_path):
    assert _course_env(tmp_path) == {"MEM_LIMIT": str(3 * 1024**3), "CPU_LIMIT": "2.0"}


def display_args() -> list[str]:
    """The jupyter-resource-usage arguments the rendered hub configuration gives every server."""
    return [arg for arg in server_args(3600) if arg.startswith("--ResourceUseDisplay.")]


def server_metrics(tmp_path: Path, env: dict[str, str]) -> dict:
    """Start a jupyter_server with :func:`display_args` and ``env``; return ``/api/metrics/v1``."""
    pytest.importorskip("jupyter_resource_usage")
    port, token = free_port(), uuid.uuid4().hex
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        **env,
    }
    argv = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={tmp_path}",
        busy_server_arg(),  # with it coursehub.spawn.homedisk, the home quota on the display
        *display_args(),
    ]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api/metrics/v1"
    headers = {"Authorization": f"token {token}"}
    try:

        def metrics() -> dict | None:
            if server.poll() is not None:
                raise AssertionError((tmp_path / "server.log").read_text())
            try:
                answer = requests.get(url, headers=headers, timeout=5)
            except requests.RequestException:
                return None
            return answer.json() if answer.status_code == 200 else None

        return wait_until(metrics, timeout_s=90, interval_s=0.3, what="the metrics API")
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_every_server_tracks_its_homes_disk_with_a_warning():
    assert display_args() == [
        "--ResourceUseDisplay.track_cpu_percent=True",
        "--ResourceUseDisplay.track_disk_usage=True",
        f"--ResourceUseDisplay.disk_warning_threshold={DISK_WARNING_FRACTION}",
    ]
    assert 0 < DISK_WARNING_FRACTION < 1


@pytest.mark.integration
def test_the_resource_display_reports_the_courses_limits(tmp_path):
    data = server_metrics(tmp_path, _course_env(tmp_path))
    assert data["limits"]["memory"]["rss"] == 3 * 1024**3
    assert data["limits"]["cpu"]["cpu"] == 2.0


@pytest.mark.integration
def test_the_resource_display_reports_the_homes_disk(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    data = server_metrics(tmp_path, {"HOME": str(home)})
    disk = psutil.disk_usage(str(home))
    assert data["disk_total"] == disk.total == data["limits"]["disk"]["disk"]
    assert 0 < data["disk_used"] <= disk.total
    assert data["limits"]["disk"]["warn"] is ((disk.total - data["disk_used"]) < disk.total * 0.1)


@pytest.mark.root
@pytest.mark.integration
def test_a_nearly_full_home_disk_flashes_the_warning(tmp_path):
    with loop_mount(tmp_path, 32, "ext4") as disk:
        home = disk / "alice"
        home.mkdir()
        assert server_metrics(tmp_path, {"HOME": str(home)})["limits"]["disk"]["warn"] is False
        fill(home)
        data = server_metrics(tmp_path, {"HOME": str(home)})
        assert data["limits"]["disk"]["warn"] is True
        assert data["disk_total"] == psutil.disk_usage(str(disk)).total


def test_a_quota_replaces_the_file_systems_figures_and_warns_near_it():
    metrics = {"rss": 1, "disk_used": 5, "disk_total": 10**12, "limits": {"memory": {"rss": 9}}}
    shown = plan_disk_metrics(metrics, 19 * M, 20 * M, 0.1)
    assert shown["disk_used"] == 19 * M and shown["disk_total"] == 20 * M
    assert shown["limits"] == {"memory": {"rss": 9}, "disk": {"disk": 20 * M, "warn": True}}
    assert plan_disk_metrics(metrics, 2 * M, 20 * M, 0.1)["limits"]["disk"]["warn"] is False
    assert "warn" not in plan_disk_metrics(metrics, 19 * M, 20 * M, 0)["limits"]["disk"]
    assert metrics["disk_total"] == 10**12  # the handler's own figures are left alone


def test_the_home_is_walked_where_no_quota_tool_reads_it(tmp_path):
    (tmp_path / "data.bin").write_bytes(b"\1" * 3 * M)
    used, total = read_home(str(tmp_path), 20 * M)
    assert total == 20 * M and 3 * M <= used < 4 * M
    assert read_home(str(tmp_path), None) is None  # no quota known: the display is left alone
    assert parse_quota_env("20971520") == 20 * M
    assert parse_quota_env("") is parse_quota_env("none") is parse_quota_env("0") is None


@pytest.mark.integration
def test_the_display_shows_the_students_quota_from_the_hub(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "data.bin").write_bytes(b"\1" * 19 * M)
    data = server_metrics(tmp_path, {"HOME": str(home), QUOTA_ENV: str(20 * M)})
    assert data["disk_total"] == 20 * M == data["limits"]["disk"]["disk"]
    assert 19 * M <= data["disk_used"] < 20 * M
    assert data["limits"]["disk"]["warn"] is True


@pytest.mark.root
@pytest.mark.integration
def test_on_a_btrfs_qgroup_home_the_display_shows_the_quota_and_warns_near_it(tmp_path):
    """btrfs's statfs ignores qgroups: the size shown is the quota, the use the qgroup's."""
    with loop_mount(tmp_path, 200, "btrfs") as disk:
        subprocess.run(["btrfs", "quota", "enable", str(disk)], check=True, capture_output=True)
        home = disk / "alice"
        subprocess.run(["btrfs", "subvolume", "create", str(home)], check=True, capture_output=True)
        subprocess.run(["btrfs", "qgroup", "limit", "20M", str(home)], check=True)
        env = {"HOME": str(home), QUOTA_ENV: str(20 * M)}
        data = server_metrics(tmp_path, env)
        assert data["disk_total"] == 20 * M == data["limits"]["disk"]["disk"]
        assert psutil.disk_usage(str(disk)).total > 100 * M
        assert data["disk_used"] < 2 * M and data["limits"]["disk"]["warn"] is False
        (home / "big.bin").write_bytes(b"\1" * 19 * M)
        subprocess.run(["sync"], check=True)
        data = server_metrics(tmp_path, env)
        assert data["disk_total"] == 20 * M
        assert 18 * M <= data["disk_used"] <= 20 * M
        assert data["limits"]["disk"]["warn"] is True
        # without the hub's variable, the limit btrfs enforces is the size shown
        assert server_metrics(tmp_path, {"HOME": str(home)})["disk_total"] == 20 * M
