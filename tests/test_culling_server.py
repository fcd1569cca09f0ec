"""Culling inside a server: a GPU held idle stops sooner, a running runner job is activity.

Pure rules from tables, then real processes: ``coursehub run`` jobs seen by
:func:`coursehub.spawn.busyactivity.running_job_pids`, and real jupyter
servers with the extension, one of them told it holds a GPU
(``COURSEHUB_GPU_IDLE_S``: the GPU itself is not needed to stop the server,
so none is used here).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from coursehub.contract import SERVER_ARG, make_profile
from coursehub.contract import profile_to_json as render_profile
from coursehub.spawn.busyactivity import (
    GPU_IDLE_VAR,
    parse_gpu_idle_s,
    plan_gpu_culling,
    plan_pid_file_pids,
    running_job_pids,
)
from helpers import free_port, local_spawner, wait_until

SLEEPER = "import time\ntime.sleep(300)\n"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("900", 900),
        (" 600 ", 600),
        ("0", None),
        ("", None),
        (None, None),
        ("soon", None),
        ("-5", None),
        ("90.5", 90),
    ],
)
def test_the_gpu_idle_time_is_read_from_the_environment_or_ignored(text, seconds):
    assert parse_gpu_idle_s(text) == seconds


@pytest.mark.parametrize(
    ("gpu_idle_s", "timeout", "interval", "kernel_timeout", "kernel_interval"),
    [
        (900, 3600, 300, 900, 300),
        (900, 0, 300, 900, 300),
        (900, 600, 300, 600, 300),
        (60, 3600, 300, 60, 30),
        (3, 3600, 300, 3, 1),
        (900, 3600, 0, 900, 900),
    ],
)
def test_a_server_holding_a_gpu_culls_idle_kernels_then_stops_sooner(
    gpu_idle_s, timeout, interval, kernel_timeout, kernel_interval
):
    plan = plan_gpu_culling(gpu_idle_s, timeout, interval)
    assert plan["ServerApp"] == {"shutdown_no_activity_timeout": gpu_idle_s}
    assert plan["MappingKernelManager"] == {
        "cull_idle_timeout": kernel_timeout,
        "cull_interval": kernel_interval,
        "cull_busy": False,
        "cull_connected": True,
    }


def test_pid_files_give_their_pid_and_nothing_else():
    assert plan_pid_file_pids(["123\n", " 45 ", "x", "", "-3", "0", "12 13"]) == {123, 45}


def test_only_a_server_whose_profile_has_gpus_is_told_to_stop_sooner(tmp_path):
    from coursehub.spawn.spawner import CourseProfiles

    gpu = make_profile("gpu", cpu_limit=2, mem_limit="8G", gpus=1)
    cpu = make_profile("cpu", cpu_limit=2, mem_limit="4G")
    environments = {}
    for profile in (gpu, cpu):
        group = (f"nbgrader-{profile.name}", {"profile": render_profile(profile)})
        spawner = local_spawner([group], name="chtestgpu")
        profiles = CourseProfiles(
            "local", gpu_ids=[0], state_path=tmp_path / f"{profile.name}.json", gpu_idle_s=600
        )
        profiles.apply(spawner, {})
        environments[profile.name] = spawner.environment
    assert environments["gpu"][GPU_IDLE_VAR] == "600"
    assert GPU_IDLE_VAR not in environments["cpu"]


def _runner_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "COURSEHUB_SLOTS_DIR": str(tmp_path / "slots"),
        "COURSEHUB_RUNS_DIR": str(tmp_path / "runs"),
        "COURSEHUB_CPU_BUDGET": "2",
    }


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_a_job_started_below_the_server_or_without_waiting_is_a_running_job(tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    env = _runner_env(tmp_path)
    runs = tmp_path / "runs"
    assert running_job_pids(os.getpid(), runs) == set()
    command = [sys.executable, "-m", "coursehub", "run", "--threads", "1"]
    foreground = subprocess.Popen([*command, "--", "sleeper.py"], cwd=tmp_path, env=env)
    try:
        found = wait_until(
            lambda: running_job_pids(os.getpid(), runs),
            timeout_s=60,
            interval_s=0.2,
            what="the foreground job's bootstrap",
        )
        assert all(pid != foreground.pid for pid in found)  # the job, not its runner
    finally:
        _stop(foreground)
    wait_until(lambda: not running_job_pids(os.getpid(), runs), timeout_s=30, interval_s=0.2)

    log = runs / "detached.log"
    subprocess.run(
        [*command, "--no-wait", "--log", str(log), "--", "sleeper.py"],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=60,
    )
    pid_file = log.with_suffix(".pid")
    wait_until(pid_file.exists, timeout_s=60, interval_s=0.2, what="the detached runner")
    runner = int(pid_file.read_text())
    try:
        # not below this process any more: found through its pid file
        assert runner in running_job_pids(os.getpid(), runs)
        assert runner not in running_job_pids(os.getpid(), tmp_path / "elsewhere")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner, 15)
    wait_until(lambda: not pid_file.exists(), timeout_s=30, interval_s=0.2)


@dataclass
class Server:
    """A real jupyter server with the extension (every 0.5 s)."""

    process: subprocess.Popen[bytes]
    base: str
    token: str
    session: requests.Session
    log: Path

    def up(self) -> bool:
        return self.process.poll() is None


def _start_server(root: Path, env_extra: dict[str, str]) -> Server:
    root.mkdir(parents=True)
    port, token = free_port(), uuid.uuid4().hex
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(root / "config"),
        "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
        "JUPYTER_DATA_DIR": str(root / "data"),
        **env_extra,
    }
    argv = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--BusyKernelActivity.interval_s=0.5",
        SERVER_ARG,
    ]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    log = root / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    session = requests.Session()
    session.headers["Authorization"] = f"token {token}"
    server = Server(process, f"http://127.0.0.1:{port}", token, session, log)

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(log.read_text())
        try:
            session.get(f"{server.base}/api/status", timeout=5).raise_for_status()
        except requests.RequestException:
            return False
        return True

    wait_until(answers, timeout_s=90, interval_s=0.3, what="the jupyter server to answer")
    return server


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        if server.up():
            _stop(server.process)
        server.session.close()


def _busy_kernel(server: Server) -> str:
    from test_hub_busyactivity import _execute_and_close_tab

    kernel = server.session.post(
        f"{server.base}/api/kernels", json={"name": "python3"}, timeout=60
    ).json()
    asyncio.run(
        _execute_and_close_tab(
            server.base, server.token, kernel["id"], "import time\ntime.sleep(300)"
        )
    )
    return str(kernel["id"])


@pytest.mark.integration
@pytest.mark.slow
def test_an_idle_server_holding_a_gpu_stops_and_busy_or_job_or_cpu_servers_stay(tmp_path, servers):
    """Jupyter Server checks ``shutdown_no_activity`` every 60 s: this test takes 1-2 minutes."""
    gpu = {GPU_IDLE_VAR: "3"}
    idle = []
    for name, env in (("idle-gpu", gpu), ("idle-cpu", {})):
        # a kernel started as soon as the server is up, then left idle with no tab: on a
        # loaded machine the next servers' starts may outlast the first 60 s check, which
        # would stop a server that never had a kernel
        server = _start_server(tmp_path / name, env)
        servers.append(server)
        server.session.post(f"{server.base}/api/kernels", json={"name": "python3"}, timeout=60)
        idle.append(server)
    idle_gpu, idle_cpu = idle
    busy_gpu = _start_server(tmp_path / "busy-gpu", gpu)
    job_gpu = _start_server(tmp_path / "job-gpu", {**gpu, **_runner_env(tmp_path / "job-gpu")})
    servers += [busy_gpu, job_gpu]
    busy_kernel = _busy_kernel(busy_gpu)
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    job_log = tmp_path / "job-gpu" / "runs" / "train.log"
    job_log.parent.mkdir(mode=0o700)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "coursehub",
            "run",
            "--threads",
            "1",
            "--no-wait",
            "--log",
            str(job_log),
            "--",
            "sleeper.py",
        ],
        cwd=tmp_path,
        env=_runner_env(tmp_path / "job-gpu"),
        check=True,
        timeout=60,
    )
    wait_until(job_log.with_suffix(".pid").exists, timeout_s=60, interval_s=0.2)
    runner = int(job_log.with_suffix(".pid").read_text())
    try:
        wait_until(
            lambda: not idle_gpu.up(),
            timeout_s=150,
            interval_s=1,
            what="the idle GPU server to stop itself",
        )
        assert "holds a GPU" in idle_gpu.log.read_text()
        assert "shutting down" in idle_gpu.log.read_text()
        assert busy_gpu.up(), busy_gpu.log.read_text()[-3000:]
        state = busy_gpu.session.get(f"{busy_gpu.base}/api/kernels/{busy_kernel}", timeout=10)
        assert state.json()["execution_state"] == "busy"
        assert job_gpu.up(), job_gpu.log.read_text()[-3000:]
        assert idle_cpu.up(), idle_cpu.log.read_text()[-3000:]
        assert "holds a GPU" not in idle_cpu.log.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner, 15)
