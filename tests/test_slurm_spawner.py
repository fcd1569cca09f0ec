"""Student servers as Slurm jobs: batchspawner's SlurmSpawner on a real hub and a real Slurm."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import requests

from helpers import free_port, wait_until
from hubfixture import RunningHub, find_proxy

pytestmark = [pytest.mark.slurm, pytest.mark.integration]


def jobs_of(name: str) -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-n", name, "-o", "%i %T"], capture_output=True, text=True, check=True
    )
    return out.stdout.split("\n")[:-1] if out.stdout else []


def slurm_extra_config(partition: str) -> str:
    """SlurmSpawner settings for the test hub (appended after its own spawner settings)."""
    singleuser = str(Path(sys.executable).parent / "batchspawner-singleuser")
    return f"""
import batchspawner  # noqa: F401  (registers batchspawner's API handler)
c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
# The test's interpreter lives under /root (0700) on the test machines, so the
# job runs as root (no sudo here either); a real hub keeps batchspawner's
# "sudo -E -u {{username}}" and each server runs as its student.
c.SlurmSpawner.exec_prefix = ""
c.Spawner.environment = {{"SLURM_CONF": {os.environ["SLURM_CONF"]!r}}}
c.SlurmSpawner.req_partition = {partition!r}
c.SlurmSpawner.req_nprocs = "1"
c.SlurmSpawner.req_memory = "1024M"
c.SlurmSpawner.req_runtime = "0:10:00"
c.SlurmSpawner.batchspawner_singleuser_cmd = {singleuser!r}
c.SlurmSpawner.start_timeout = 120
c.SlurmSpawner.poll_interval = 2
"""


@pytest.fixture
def slurm_hub(slurm_cluster, tmp_path):
    """A hub of its own whose servers are Slurm jobs on the session's cluster."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    pytest.importorskip("batchspawner", reason="batchspawner is not installed")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(tmp_path / "hub", proxy, ports)
    hub.workdir.mkdir()
    hub.extra_config = slurm_extra_config(slurm_cluster.partition)
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


@pytest.fixture
def student():
    """A Unix account ``chtest-slurm-...`` (SlurmSpawner reads its home), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a Unix account")
    name = f"chtest-slurm-{uuid.uuid4().hex[:6]}"
    home = Path(tempfile.mkdtemp(prefix="chtest-home-"))
    subprocess.run(["useradd", "-d", str(home), "-M", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def test_a_slurm_spawner_server_starts_is_reachable_and_stopping_it_leaves_no_job(
    slurm_hub, student
):
    user = student
    api = requests.Session()
    api.headers["Authorization"] = f"token {slurm_hub.admin_token}"
    assert api.post(f"{slurm_hub.api_url}/users/{user}", timeout=10).status_code == 201
    started = api.post(f"{slurm_hub.api_url}/users/{user}/server", timeout=30)
    assert started.status_code in (201, 202), slurm_hub.log_tail()

    def ready() -> bool:
        model = api.get(f"{slurm_hub.api_url}/users/{user}", timeout=10).json()
        return bool(model.get("servers", {}).get("", {}).get("ready"))

    wait_until(ready, timeout_s=120, what=f"{user}'s server to be ready")
    jobs = jobs_of("spawner-jupyterhub")
    assert len(jobs) == 1 and jobs[0].endswith(" RUNNING"), jobs
    # jupyter_server answers GET /api without authentication: through the proxy, this
    # reaches the server inside the Slurm job.
    answer = requests.get(f"{slurm_hub.url}/user/{user}/api", timeout=10)
    assert answer.status_code == 200 and "version" in answer.json()
    assert api.delete(f"{slurm_hub.api_url}/users/{user}/server", timeout=60).status_code in (
        202,
        204,
    )
    wait_until(lambda: jobs_of("spawner-jupyterhub") == [], timeout_s=60, what="the job to go")
