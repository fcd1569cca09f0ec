"""Inside a student's server the resource display shows the course's limits, not the host's.

jupyter-resource-usage reads ``MEM_LIMIT`` and ``CPU_LIMIT``; JupyterHub's
``Spawner.get_env`` sets them from ``mem_limit`` and ``cpu_limit``, which
the course profile sets (:class:`coursehub.spawn.spawner.CourseProfiles`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from types import SimpleNamespace

import pytest
import requests

from coursehub.contract import make_profile
from coursehub.contract import profile_to_json as render_profile
from helpers import free_port, wait_until

COURSE = make_profile("m2-2cpu-3g", cpu_limit=2, mem_limit="3G", n_threads=2)


def _course_env(tmp_path) -> dict[str, str]:
    from jupyterhub.spawner import SimpleLocalProcessSpawner

    from coursehub.spawn.spawner import CourseProfiles

    group = SimpleNamespace(name="nbgrader-m2", properties={"profile": render_profile(COURSE)})
    user = SimpleNamespace(name="chtestlim", groups=[group], url="/user/chtestlim/")
    # the hub and server models get_env reads (JupyterHub gives the real ones at spawn)
    hub = SimpleNamespace(public_host="", api_url="http://127.0.0.1:8081/hub/api", base_url="/hub/")
    spawner = SimpleLocalProcessSpawner(user=user, name="", hub=hub)
    CourseProfiles("local", gpu_ids=[], state_path=tmp_path / "gpus.json").apply(spawner, {})
    env = spawner.get_env()
    return {key: env[key] for key in ("MEM_LIMIT", "CPU_LIMIT")}


def test_the_server_environment_carries_the_courses_limits(tmp_path):
    assert _course_env(tmp_path) == {"MEM_LIMIT": str(3 * 1024**3), "CPU_LIMIT": "2.0"}


@pytest.mark.integration
def test_the_resource_display_reports_the_courses_limits(tmp_path):
    pytest.importorskip("jupyter_resource_usage")
    port, token = free_port(), uuid.uuid4().hex
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        **_course_env(tmp_path),
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
        "--ResourceUseDisplay.track_cpu_percent=True",
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

        data = wait_until(metrics, timeout_s=90, interval_s=0.3, what="the metrics API")
        assert data["limits"]["memory"]["rss"] == 3 * 1024**3
        assert data["limits"]["cpu"]["cpu"] == 2.0
    finally:
        server.terminate()
        server.wait(timeout=20)
