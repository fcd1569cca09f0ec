"""Student servers as Slurm jobs: batchspawner's SlurmSpawner on a real hub and a real Slurm."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import requests

from helpers import free_port, wait_until
from hubfixture import RunningHub, find_proxy
from slurmfixture import job_server_pids

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


#: coursehub's SlurmSpawner (the rendered class) with its pages. The periodic poll is
#: out of the way: the hub's job watch (coursehub.spawn.slurmwatch) alone must notice.
NOTICE_CONFIG = """
from coursehub.spawn.hubpages import template_dir
from coursehub.spawn.serverexit import server_stop_notices
c.JupyterHub.spawner_class = "coursehub.spawn.slurmspawner.CoursehubSlurmSpawner"
c.SlurmSpawner.poll_interval = 3600
c.JupyterHub.template_paths = [template_dir()]
c.JupyterHub.template_vars = {"server_stop_notices": server_stop_notices}
"""
#: Seconds within which a dead server's reload must show "Server not running" and
#: Start must start a new server (issue #32).
NOTICED_WITHIN_S = 10


@pytest.fixture
def notice_hub(slurm_cluster, tmp_path):
    """A hub whose servers are jobs of coursehub's SlurmSpawner (job watch, no periodic poll)."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    pytest.importorskip("batchspawner", reason="batchspawner is not installed")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(tmp_path / "hub", proxy, ports)
    hub.workdir.mkdir()
    hub.extra_config = slurm_extra_config(slurm_cluster.partition) + NOTICE_CONFIG
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def test_a_killed_slurm_server_is_noticed_said_and_started_again(notice_hub, student):
    from test_server_exit import _signed_in

    hub, user = notice_hub, student
    api = requests.Session()
    api.headers["Authorization"] = f"token {hub.admin_token}"
    session = _signed_in(hub, user)

    def server() -> dict:
        model = api.get(f"{hub.api_url}/users/{user}", timeout=10).json()
        return model.get("servers", {}).get("", {})

    assert session.get(f"{hub.url}/hub/spawn/{user}", timeout=60).status_code == 200
    wait_until(lambda: bool(server().get("ready")), timeout_s=120, what="the server")
    job_id = str(server()["state"]["job_id"])
    pids = job_server_pids(job_id)
    assert pids, subprocess.run(["scontrol", "listpids", job_id], capture_output=True, text=True)
    for pid in pids:
        os.kill(pid, 9)
    killed = time.monotonic()
    page: dict[str, requests.Response] = {}

    def reload_says_stopped() -> bool:
        page["lab"] = session.get(f"{hub.url}/user/{user}/lab", timeout=30)
        return page["lab"].status_code == 424

    wait_until(reload_says_stopped, timeout_s=NOTICED_WITHIN_S, interval_s=0.5)
    assert "Your server stopped unexpectedly" in page["lab"].text, hub.log_tail()
    assert session.get(f"{hub.url}/hub/spawn/{user}", timeout=60).status_code == 200
    restarted = server()  # Start submitted a new job (not a redirect to the dead server)
    assert restarted.get("pending") == "spawn" or (restarted.get("state") or {}).get(
        "job_id"
    ) not in (None, job_id)
    assert time.monotonic() - killed <= NOTICED_WITHIN_S, hub.log_tail()
    wait_until(lambda: bool(server().get("ready")), timeout_s=120, what="the new server")
    assert "stopped unexpectedly" not in session.get(f"{hub.url}/hub/home", timeout=30).text
    api.delete(f"{hub.api_url}/users/{user}/server", timeout=60)
    wait_until(lambda: jobs_of("spawner-jupyterhub") == [], timeout_s=60, what="the job to go")
