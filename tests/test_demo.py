"""``coursehub demo`` as a subprocess: a real hub, proxy, seeded course, student servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

from coursehub.demo.hub import find_proxy, free_port
from coursehub.demo.seed import roster_bytes
from coursehub.errors import UsageError

pytestmark = pytest.mark.integration

STUDENT = "p2501001"
START_TIMEOUT_S = 90.0


def _proxy_or_skip() -> None:
    try:
        find_proxy()
    except UsageError as exc:
        pytest.skip(str(exc))


class Demo:
    """One ``coursehub demo`` subprocess on a free port."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.output = data_dir.parent / f"demo-{self.port}.out"
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "coursehub", "demo", "--port", str(self.port),
                 "--data-dir", str(data_dir)],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self._wait_for_banner()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def _wait_for_banner(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "coursehub demo is running" not in self.text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the demo did not start:\n{self.text()[-3000:]}")
            time.sleep(0.3)

    def token(self) -> str:
        return json.loads((self.data_dir / "demo-secrets.json").read_text())["service_token"]

    def api(self, method: str, path: str) -> requests.Response:
        headers = {"Authorization": f"token {self.token()}"}
        return requests.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=30)

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def wait_for_server(demo: Demo, username: str) -> psutil.Process:
    """Start ``username``'s server through the API; return its process once it is ready."""
    assert demo.api("POST", f"/users/{username}/server").status_code in (201, 202)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        model = demo.api("GET", f"/users/{username}").json()
        if model["servers"].get("", {}).get("ready"):
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the server of {username} did not start")
    for process in demo.descendants():
        try:
            if process.environ().get("JUPYTERHUB_USER") == username:
                return process
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    pytest.fail(f"no process of {username} among the demo's descendants")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _proxy_or_skip()
    return tmp_path_factory.mktemp("demo") / "data"


def test_roster_is_thirty_french_students_semicolon_separated():
    text = roster_bytes().decode("utf-8")
    lines = text.strip().splitlines()
    assert lines[0] == "N° étudiant;Nom;Prénom;Courriel;Groupe"
    assert len(lines) == 31
    assert any("é" in line or "ï" in line for line in lines[1:])


def test_demo_serves_login_and_student_server_runs_under_profile(demo_dir):
    demo = Demo(demo_dir)
    try:
        assert "DEMO ONLY" in demo.text()
        login = requests.get(f"{demo.url}/hub/login", timeout=10)
        assert login.status_code == 200 and 'name="password"' in login.text
        groups = demo.api("GET", f"/users/{STUDENT}").json()["groups"]
        assert "nbgrader-mlmeca-2025" in groups
        server = wait_for_server(demo, STUDENT)
        env = server.environ()
        assert env["OMP_NUM_THREADS"] == "2" and env["OPENBLAS_NUM_THREADS"] == "2"
        assert env["OMP_WAIT_POLICY"] == "PASSIVE"
        assert env["HOME"] == str(demo_dir / "homes" / STUDENT)
        assert (demo_dir / "homes" / STUDENT / "double_pendulum.ipynb").is_file()
        # the demo assignment is released, and the server's nbgrader sees the exchange
        exchange = demo_dir / "nbgrader" / "exchange" / "mlmeca-2025"
        assert (exchange / "outbound" / "pendulum_energy" / "pendulum_energy.ipynb").is_file()
        assert (Path(env["JUPYTER_CONFIG_PATH"]) / "nbgrader_config.py").is_file()
        if os.geteuid() == 0 and Path("/sys/fs/cgroup/cpu").is_dir():
            check_cgroup(server.pid)
    finally:
        status = demo.stop()
    assert status == 0
    assert not demo.descendants()
    assert "stopped; data kept" in demo.text()


def check_cgroup(pid: int) -> None:
    """The server's v1 cgroup has a 2-CPU quota and a 4 GiB memory limit."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    paths = {c: p for _, cs, p in (line.split(":", 2) for line in lines) for c in cs.split(",")}
    cpu_dir = Path("/sys/fs/cgroup/cpu") / paths["cpu"].lstrip("/")
    mem_dir = Path("/sys/fs/cgroup/memory") / paths["memory"].lstrip("/")
    assert cpu_dir.name == f"jupyter-{STUDENT}"
    assert (cpu_dir / "cpu.cfs_quota_us").read_text().strip() == "200000"
    assert (cpu_dir / "cpu.cfs_period_us").read_text().strip() == "100000"
    assert int((mem_dir / "memory.limit_in_bytes").read_text()) == 4 * 1024**3


def test_restart_keeps_data_and_does_not_reseed(demo_dir):
    if not (demo_dir / "catalog.sqlite").exists():
        pytest.skip("needs the data left by the previous test")
    secrets_before = (demo_dir / "demo-secrets.json").read_text()
    demo = Demo(demo_dir)
    try:
        assert "catalog kept" in demo.text()
        users = demo.api("GET", "/users").json()
        assert STUDENT in {u["name"] for u in users}
        assert (demo_dir / "jupyterhub.sqlite").exists()
        assert (demo_dir / "homes" / STUDENT).is_dir()
    finally:
        assert demo.stop() == 0
    assert (demo_dir / "demo-secrets.json").read_text() == secrets_before
    assert not demo.descendants()
