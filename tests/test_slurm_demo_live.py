"""``coursehub demo --spawner slurm`` on the test cluster: a student's server is a Slurm job."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from coursehub.demo.slurm import leftover_job_ids
from helpers import free_port, wait_until
from hubfixture import find_proxy

pytestmark = [pytest.mark.slurm, pytest.mark.integration, pytest.mark.slow]

#: A student of the seeded course MLMECA, whose profile m2-mlmeca asks 2 CPUs, 4G, 2 threads.
STUDENT = "p2501001"
START_TIMEOUT_S = 180.0


class SlurmDemo:
    """One ``coursehub demo --spawner slurm`` subprocess on a free port (SLURM_CONF inherited)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.output = data_dir.parent / f"demo-{self.port}.out"
        command = [sys.executable, "-m", "coursehub", "demo", "--spawner", "slurm"]
        command += ["--port", str(self.port), "--data-dir", str(data_dir)]
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

        def banner() -> bool:
            assert self.process.poll() is None, f"the demo exited:\n{self.text()[-3000:]}"
            return "coursehub demo is running" in self.text()

        try:
            wait_until(banner, START_TIMEOUT_S, 0.3, what="the demo's banner")
        except AssertionError:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def secrets(self) -> dict[str, str]:
        return json.loads((self.data_dir / "demo-secrets.json").read_text())

    def api(self, method: str, path: str) -> requests.Response:
        headers = {"Authorization": f"token {self.secrets()['service_token']}"}
        return requests.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=30)

    def login(self, username: str) -> requests.Session:
        """Return a browser-like session signed in through the hub's login form."""
        session = requests.Session()
        form = session.get(f"{self.url}/hub/login", timeout=10).text
        xsrf = re.search(r'name="_xsrf"[^>]*value="([^"]+)"', form)
        data = {
            "username": username,
            "password": self.secrets()["password"],
            "_xsrf": xsrf.group(1) if xsrf else "",
        }
        answer = session.post(f"{self.url}/hub/login", data=data, timeout=30)
        assert answer.status_code == 200 and session.cookies.get("jupyterhub-session-id")
        return session

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def job_fields(job_id: str) -> dict[str, str]:
    """Return ``scontrol show job``'s ``Key=Value`` fields ({} once the job is gone)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True)
    return dict(re.findall(r"(\S+?)=(\S*)", out.stdout)) if out.returncode == 0 else {}


def job_state(job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip()


#: Seconds a cancelled job may stay listed by squeue while it ends (COMPLETING: slurmd
#: still cleaning up its step on a loaded node, squeue(1) "JOB STATE CODES").
JOB_END_TIMEOUT_S = 30.0
#: States of a job that has ended or is ending (squeue(1)).
ENDING = {"", "COMPLETING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL"}


def still_running(job_id: str, timeout_s: float) -> str:
    """Return the job's state if it is still pending or running after ``timeout_s``, else ""."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = job_state(job_id)
        if state in ENDING:
            return ""
        if time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def server_environ(username: str) -> dict[str, str]:
    """Return the environment of ``username``'s jupyterhub-singleuser (the job runs here)."""
    for process in psutil.process_iter():
        try:
            env = process.environ()
            if env.get("JUPYTERHUB_USER") == username and "singleuser" in " ".join(
                process.cmdline()
            ):
                return env
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    pytest.fail(f"no server process of {username} on this host")


def test_a_students_demo_server_is_a_slurm_job_with_the_courses_request(slurm_cluster, tmp_path):
    if find_proxy() is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    pytest.importorskip("batchspawner", reason="batchspawner is not installed")
    data_dir = tmp_path / "data"
    demo = SlurmDemo(data_dir)
    job_id = ""
    try:
        assert "servers run as Slurm jobs" in demo.text()
        student = demo.login(STUDENT)
        # one course: the spawn page starts the server at once
        student.get(f"{demo.url}/hub/spawn", timeout=60)

        def ready() -> bool:
            model = demo.api("GET", f"/users/{STUDENT}").json()
            return bool(model["servers"].get("", {}).get("ready"))

        wait_until(ready, START_TIMEOUT_S, 1.0, what=f"the server of {STUDENT}")
        [job_id] = leftover_job_ids(data_dir / "jupyterhub.sqlite")
        fields = job_fields(job_id)
        assert fields["JobState"] == "RUNNING", fields
        assert fields["CPUs/Task"] == "2" and fields["MinMemoryNode"] == "4G", fields
        env = server_environ(STUDENT)
        assert env["SLURM_JOB_ID"] == job_id
        assert env["OMP_NUM_THREADS"] == "2" and env["OMP_WAIT_POLICY"] == "PASSIVE"
        assert env["HOME"] == str(data_dir / "homes" / STUDENT)
        assert (data_dir / "homes" / STUDENT / "double_pendulum.ipynb").is_file()
        # the student reaches the server inside the job through the hub (OAuth, then proxy)
        lab = student.get(f"{demo.url}/user/{STUDENT}/lab", timeout=30)
        assert lab.status_code == 200 and "jupyter" in lab.text.lower(), lab.text[-500:]
        # a cookie-authenticated API call carries the server's own _xsrf cookie
        token = student.cookies.get("_xsrf", path=f"/user/{STUDENT}/")
        xsrf = {"X-XSRFToken": token or ""}
        contents = student.get(f"{demo.url}/user/{STUDENT}/api/contents", headers=xsrf, timeout=30)
        assert contents.status_code == 200, contents.text[-500:]
        names = {item["name"] for item in contents.json()["content"]}
        assert "double_pendulum.ipynb" in names
    finally:
        status = demo.stop()
        left = job_id and still_running(job_id, JOB_END_TIMEOUT_S)
        if left:
            subprocess.run(["scancel", job_id], check=False, capture_output=True)
            pytest.fail(f"stopping the demo left Slurm job {job_id} behind ({left})")
    assert status == 0, demo.text()[-3000:]
