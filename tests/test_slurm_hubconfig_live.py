"""What ``coursehub hub config --spawner slurm`` renders runs: a real hub on the test cluster.

The configuration is rendered by :func:`coursehub.hub.render.render_hub_config`
with this cluster's ports and partition, and started as is, with three
test-only lines appended (below): the student's server is a Slurm job with
the course's CPU and memory request and thread variables, survives a restart
of the hub (its job id kept in the hub's database), and stopping it cancels
the job.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
import requests

from coursehub.contract import make_profile, profile_to_json, student_group
from coursehub.demo.slurm import leftover_job_ids
from coursehub.hub.process import start_hub, wait_until_up
from coursehub.hub.render import HubSettings, render_hub_config
from helpers import free_port, wait_until
from hubfixture import TEST_SCOPES, find_proxy

pytestmark = [pytest.mark.slurm, pytest.mark.integration, pytest.mark.slow]

#: The course's request: small, as the test node has 2 CPUs.
PROFILE = make_profile("slurm-small", cpu_limit=1, mem_limit="1G", n_threads=1)
START_TIMEOUT_S = 120.0

#: Appended to the rendered configuration, for this machine only: the test's
#: interpreter lives under /root (0700) and there is no sudo, so sbatch runs as
#: the hub's user (root) instead of batchspawner's "sudo -E -u {username}", and
#: jupyter-server then needs --allow-root. The test service's token reaches the API.
TEST_LINES = """
# --- test-only (tests/test_slurm_hubconfig_live.py) ---
c.SlurmSpawner.exec_prefix = ""
c.Spawner.args.append("--allow-root")
c.SlurmSpawner.poll_interval = 2
c.JupyterHub.services.append(
    {{"name": "coursehub-test", "api_token": os.environ["COURSEHUB_TEST_ADMIN_TOKEN"]}}
)
c.JupyterHub.load_roles.append(
    {{"name": "coursehub-test", "scopes": {scopes!r}, "services": ["coursehub-test"]}}
)
"""


class RenderedHub:
    """A hub started from a rendered ``jupyterhub_config.py`` (its database kept across starts)."""

    def __init__(self, workdir: Path, config: Path, ports: dict[str, int], env: dict[str, str]):
        self.workdir, self.config, self.ports, self.env = workdir, config, ports, env
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['public']}"

    def start(self) -> None:
        with (self.workdir / "jupyterhub.log").open("ab") as log:
            self.process = start_hub(self.config, self.workdir, self.env, log)
        wait_until_up(self.url, 60.0, self.process)

    def stop(self) -> None:
        """SIGTERM the hub (it stops its proxy and services), then kill anything left."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        children = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        _gone, alive = psutil.wait_procs(children, timeout=5)
        for child in alive:
            child.kill()

    def log_tail(self) -> str:
        return (self.workdir / "jupyterhub.log").read_text(errors="replace")[-4000:]


@pytest.fixture
def student():
    """A Unix account ``chtest-shc-...`` (SlurmSpawner reads its home), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a Unix account")
    name = f"chtest-shc-{uuid.uuid4().hex[:6]}"
    home = Path(tempfile.mkdtemp(prefix="chtest-home-"))
    subprocess.run(["useradd", "-d", str(home), "-M", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def rendered_hub(slurm_cluster, tmp_path):
    """The rendered slurm configuration, running (stopped, its jobs cancelled, at the end)."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    pytest.importorskip("batchspawner", reason="batchspawner is not installed")
    from coursehub.catalog.db import make_engine
    from coursehub.catalog.schema import upgrade_database

    data_dir = tmp_path / "hub"
    data_dir.mkdir()
    database_url = f"sqlite:///{tmp_path / 'catalog.sqlite'}"
    engine = make_engine(database_url)
    upgrade_database(engine)
    engine.dispose()
    ports = {name: free_port() for name in ("public", "hub", "proxy_api", "service")}
    settings = replace(
        HubSettings(),
        kind="slurm",
        data_dir=str(data_dir),
        bind_url=f"http://127.0.0.1:{ports['public']}",
        hub_bind_url=f"http://127.0.0.1:{ports['hub']}",
        hub_connect_url=f"http://127.0.0.1:{ports['hub']}",
        proxy_api_url=f"http://127.0.0.1:{ports['proxy_api']}",
        proxy_command=(proxy,),
        service_url=f"http://127.0.0.1:{ports['service']}",
        service_command=(sys.executable, "-m", "coursehub", "web", "serve"),
        database_url=database_url,
        extra={
            "slurm_partition": slurm_cluster.partition,
            "slurm_runtime": "0:15:00",
            "shared_root": str(tmp_path / "shared"),
        },
    )
    text = render_hub_config(settings)
    assert "c.JupyterHub.cleanup_servers = False" in text  # servers outlive a hub restart
    config = data_dir / "jupyterhub_config.py"
    config.write_text(text + TEST_LINES.format(scopes=list(TEST_SCOPES)))
    token = uuid.uuid4().hex
    env = {
        **os.environ,
        "SLURM_CONF": str(slurm_cluster.conf),
        "COURSEHUB_DATABASE_URL": database_url,
        "COURSEHUB_TEST_ADMIN_TOKEN": token,
    }
    hub = RenderedHub(data_dir, config, ports, env)
    hub.token = token  # type: ignore[attr-defined]
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
        ids = leftover_job_ids(data_dir / "jupyterhub.sqlite")
        if ids:
            subprocess.run(["scancel", *ids], check=False, capture_output=True)


def job_fields(job_id: str) -> dict[str, str]:
    """Return ``scontrol show job``'s ``Key=Value`` fields of a job ({} once it is gone)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True)
    return dict(re.findall(r"(\S+?)=(\S*)", out.stdout)) if out.returncode == 0 else {}


def job_state(job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip()


def server_process(username: str) -> psutil.Process:
    """Return the process of ``username``'s jupyterhub-singleuser (the job runs on this host)."""
    for process in psutil.process_iter():
        try:
            env = process.environ()
            if env.get("JUPYTERHUB_USER") == username and "singleuser" in " ".join(
                process.cmdline()
            ):
                return process
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    pytest.fail(f"no server process of {username} on this host")


def test_the_rendered_slurm_config_runs_servers_as_jobs_that_outlive_a_hub_restart(
    rendered_hub, student
):
    hub = rendered_hub
    api = requests.Session()
    api.headers["Authorization"] = f"token {hub.token}"
    base = f"{hub.url}/hub/api"
    group = student_group(f"slurmtest-{uuid.uuid4().hex[:6]}")
    assert api.post(f"{base}/users/{student}", timeout=10).status_code == 201
    assert api.post(f"{base}/groups/{group}", timeout=10).status_code == 201
    properties = {"role": "students", "profile": profile_to_json(PROFILE)}
    assert api.put(f"{base}/groups/{group}/properties", json=properties, timeout=10).ok
    assert api.post(f"{base}/groups/{group}/users", json={"users": [student]}, timeout=10).ok

    def ready() -> bool:
        model = api.get(f"{base}/users/{student}", timeout=10).json()
        return bool(model.get("servers", {}).get("", {}).get("ready"))

    started = api.post(f"{base}/users/{student}/server", timeout=30)
    assert started.status_code in (201, 202), hub.log_tail()
    wait_until(ready, START_TIMEOUT_S, 1.0, what=f"{student}'s server")

    # the job id is in the hub's database; the job asks for the course's request
    hub_db = hub.workdir / "jupyterhub.sqlite"
    [job_id] = leftover_job_ids(hub_db)
    fields = job_fields(job_id)
    assert fields["JobState"] == "RUNNING", fields
    assert fields["CPUs/Task"] == "1" and fields["MinMemoryNode"] == "1G", fields
    assert fields["Partition"] == "debug" and fields["TimeLimit"] == "00:15:00", fields
    # the server runs inside that job with the course's thread variables
    env = server_process(student).environ()
    assert env["SLURM_JOB_ID"] == job_id
    assert env["OMP_NUM_THREADS"] == "1" and env["OPENBLAS_NUM_THREADS"] == "1"
    answer = requests.get(f"{hub.url}/user/{student}/api", timeout=10)
    assert answer.status_code == 200 and "version" in answer.json()

    # the hub restarts: the job keeps running, the hub polls it and routes to it again
    hub.stop()
    assert job_state(job_id) == "RUNNING"
    hub.start()
    assert leftover_job_ids(hub_db) == [job_id]
    assert ready(), hub.log_tail()
    wait_until(
        lambda: requests.get(f"{hub.url}/user/{student}/api", timeout=10).status_code == 200,
        30.0,
        0.5,
        what="the server through the restarted hub's proxy",
    )

    # stopping the server cancels its job and clears its id
    stopped = api.delete(f"{base}/users/{student}/server", timeout=60)
    assert stopped.status_code in (202, 204), hub.log_tail()
    wait_until(lambda: job_state(job_id) == "", 60.0, 1.0, what=f"job {job_id} to end")
    wait_until(lambda: leftover_job_ids(hub_db) == [], 30.0, 0.5, what="the job id to go")
