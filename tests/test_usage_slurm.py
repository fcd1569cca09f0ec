"""Runner jobs in a Slurm server are metered: the job's environment names the jobs' usage folder.

Before, ``coursehub hub config --spawner slurm`` only warned that the
``coursehub run`` jobs started in a server wrote no usage. Now the server's
Slurm job gets ``COURSEHUB_USAGE_DIR`` (``<usage_dir>-jobs``, on storage the
compute nodes share) and ``COURSEHUB_COURSE_ID``, as a SystemdSpawner unit
does (tests/test_usage_systemd.py); the live test starts the rendered
configuration on the test cluster and runs a job inside the server's Slurm
job (``srun --overlap``) with the server's environment.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from coursehub.contract import make_profile, profile_to_json, student_group
from coursehub.demo.slurm import leftover_job_ids
from coursehub.hub.render import HubSettings, render_hub_config
from coursehub.meter.journal import USAGE_DIR_VAR, list_journals, read_records
from coursehub.meter.sampler import COURSE_VAR, JOB_FOLDER_MODE
from helpers import free_port, wait_until
from hubfixture import TEST_SCOPES, find_proxy

pytest.importorskip("batchspawner", reason="batchspawner is not installed")

from test_slurm_hubconfig_live import (
    TEST_LINES,
    RenderedHub,
    server_process,
    student,  # noqa: F401  (a fixture)
)

PROFILE = make_profile("slurm-usage", cpu_limit=1, mem_limit="1G", n_threads=1)
START_TIMEOUT_S = 120.0


@pytest.fixture
def usage_dir() -> Iterator[Path]:
    """The hub's usage folder, as on shared storage: in a folder every user may search."""
    base = Path(tempfile.mkdtemp(prefix="coursehub-slurm-usage-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base / "usage"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _start_patched(monkeypatch: pytest.MonkeyPatch, seen: dict[str, str]) -> None:
    """Replace batchspawner's submission by a record of the environment it would send."""
    from batchspawner import SlurmSpawner

    async def start(self: Any) -> tuple[str, int]:
        seen.update(self.get_env())
        return ("127.0.0.1", 8888)

    monkeypatch.setattr(SlurmSpawner, "start", start)


def test_the_slurm_spawner_sends_the_jobs_folder_and_course_to_the_job(usage_dir, monkeypatch):
    from test_spawner_classes import make_spawner

    seen: dict[str, str] = {}
    _start_patched(monkeypatch, seen)
    spawner = make_spawner("slurm")
    spawner.listen_poll_interval = 0  # nothing listens: the submission is replaced
    spawner.usage_dir = str(usage_dir)
    spawner.user_options = {"course": "ml-2026"}
    asyncio.run(spawner.start())
    jobs = usage_dir.with_name("usage-jobs")
    assert seen[USAGE_DIR_VAR] == str(jobs) and seen[COURSE_VAR] == "ml-2026"
    assert (jobs.stat().st_mode & 0o7777) == JOB_FOLDER_MODE
    # batchspawner's --export list names them, so sbatch passes them to the job
    assert {USAGE_DIR_VAR, COURSE_VAR} <= set(spawner.req_keepvars.split(","))


def test_the_slurm_demos_jobs_write_to_the_hubs_own_folder(usage_dir, monkeypatch, tmp_path):
    from coursehub.spawn.slurmspawner import DemoSlurmSpawner
    from test_spawner_classes import make_hub, make_user

    seen: dict[str, str] = {}
    _start_patched(monkeypatch, seen)
    spawner = DemoSlurmSpawner(user=make_user("ann"), hub=make_hub())
    spawner.home_dir_template = str(tmp_path / "homes" / "{username}")
    spawner.listen_poll_interval = 0
    spawner.usage_dir = str(usage_dir)
    spawner.user_options = {"course": "ml-2026"}
    asyncio.run(spawner.start())
    assert seen[USAGE_DIR_VAR] == str(usage_dir)  # every server runs as the hub's account
    assert not usage_dir.with_name("usage-jobs").exists()


#: A runner job's work: a little CPU, then its end.
JOB_SCRIPT = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


@pytest.fixture
def shared_usage_hub(slurm_cluster, tmp_path, usage_dir):
    """The rendered slurm configuration with ``--usage-dir``, running on the test cluster."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
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
            "usage_dir": str(usage_dir),
        },
    )
    config = data_dir / "jupyterhub_config.py"
    config.write_text(render_hub_config(settings) + TEST_LINES.format(scopes=list(TEST_SCOPES)))
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


def _start_server(hub: RenderedHub, username: str, course_group: str) -> None:
    api = requests.Session()
    api.headers["Authorization"] = f"token {hub.token}"  # type: ignore[attr-defined]
    base = f"{hub.url}/hub/api"
    assert api.post(f"{base}/users/{username}", timeout=10).status_code == 201
    assert api.post(f"{base}/groups/{course_group}", timeout=10).status_code == 201
    properties = {"role": "students", "profile": profile_to_json(PROFILE)}
    assert api.put(f"{base}/groups/{course_group}/properties", json=properties, timeout=10).ok
    members = {"users": [username]}
    assert api.post(f"{base}/groups/{course_group}/users", json=members, timeout=10).ok
    started = api.post(f"{base}/users/{username}/server", timeout=30)
    assert started.status_code in (201, 202), hub.log_tail()

    def ready() -> bool:
        model = api.get(f"{base}/users/{username}", timeout=10).json()
        return bool(model.get("servers", {}).get("", {}).get("ready"))

    wait_until(ready, START_TIMEOUT_S, 1.0, what=f"{username}'s server")


def _run_in_the_servers_job(server_env: dict[str, str], script: Path) -> str:
    """Run ``coursehub run`` as a step of the server's Slurm job, in the server's environment."""
    kept = {k: v for k, v in server_env.items() if not k.startswith(("SLURM_", "SRUN_"))}
    python = str(Path(sys.executable))
    step = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in kept.items())]
    step += [python, "-m", "coursehub", "run", "--name", "metered", "--", str(script)]
    job_id = server_env["SLURM_JOB_ID"]
    srun = ["srun", f"--jobid={job_id}", "--overlap", "--export=NONE", "--ntasks=1", *step]
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": os.environ["SLURM_CONF"]}
    done = subprocess.run(srun, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.slurm
@pytest.mark.integration
@pytest.mark.slow
def test_a_runner_job_in_a_slurm_server_writes_its_usage_to_the_shared_folder(
    shared_usage_hub,
    student,  # noqa: F811  (the fixture imported above)
    usage_dir,
    tmp_path,
):
    course = f"slurmuse-{uuid.uuid4().hex[:6]}"
    _start_server(shared_usage_hub, student, student_group(course))
    server_env = server_process(student).environ()
    jobs = usage_dir.with_name("usage-jobs")
    assert server_env[USAGE_DIR_VAR] == str(jobs)
    assert server_env[COURSE_VAR] == course

    script = tmp_path / "work.py"
    script.write_text(JOB_SCRIPT)
    script.parent.chmod(0o755)
    _run_in_the_servers_job(server_env, script)

    records = [r for path in list_journals(jobs) for r in read_records(path).records]
    kinds = [r.event for r in records]
    assert kinds[0] == "open" and kinds[-1] == "close", records
    assert {r.kind for r in records} == {"job"} and {r.course_id for r in records} == {course}
    assert {r.user for r in records} == {student}
    assert records[-1].cpu_s > 0.2
