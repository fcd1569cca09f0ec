"""A real jupyter-server with an exam server's options: no terminal, kernels without network,
only the server extensions an exam needs, no configuration of the student's own.

The options are :func:`coursehub.examroom.server.plan_exam_args`' (what the
spawner gives an exam server); the server is a real ``jupyter server``
subprocess on a port of this worker's block, its kernel started through the
REST API (``POST /api/kernels``), as JupyterLab does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from jupyter_core.paths import ENV_CONFIG_PATH, SYSTEM_CONFIG_PATH

from coursehub.examroom.server import ExamSeat, configured_server_extensions, plan_exam_args
from coursehub.sandbox.command import sandbox_mode
from coursehub.spawn.examserver import exam_config
from helpers import free_port

TOKEN = "exam-test-token"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        sandbox_mode() not in ("root", "userns"),
        reason="this host allows no user namespaces (unshare --user --net fails)",
    ),
]


def request(port: int, path: str, method: str = "GET", body: dict | None = None) -> tuple:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    req.add_header("Authorization", f"token {TOKEN}")
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            body = answer.read()
            kind = answer.headers.get("Content-Type", "")
            return answer.status, json.loads(body or b"null") if "json" in kind else body
    except urllib.error.HTTPError as exc:
        return exc.code, None


def wait_until_up(port: int, server: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, "the exam server exited"
        try:
            if request(port, "/api/status")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("the exam server did not answer")


def kernel_pids(kernel_id: str) -> list[int]:
    """The processes whose command line names the kernel's connection file."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if entry.name.isdigit() and "ipykernel" in cmdline and kernel_id in cmdline:
            found.append(int(entry.name))
    return found


def net_namespace(pid: int) -> str:
    """The network namespace of ``pid`` ("" once it has exited: the sandbox's wrappers exec)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except FileNotFoundError:
        return ""


def test_an_exam_server_has_no_terminal_and_its_kernel_its_own_network(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    seat = ExamSeat("mlmeca-2025", "final", home)
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "HOME": str(home)}
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}"]
    command += ["--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}"]
    command += [f"--ServerApp.root_dir={home}", *plan_exam_args(seat)]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_up(port, server)
        assert request(port, "/api/terminals")[0] == 404
        status, kernel = request(port, "/api/kernels", "POST", {"name": "python3"})
        assert status == 201, (tmp_path / "server.log").read_text()[-3000:]
        deadline = time.monotonic() + 30
        while not (pids := kernel_pids(kernel["id"])) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pids, (tmp_path / "server.log").read_text()[-2000:]
        own = os.readlink("/proc/self/ns/net")
        assert all(net_namespace(pid) != own for pid in pids)
        assert any(net_namespace(pid) for pid in pids)  # the kernel itself is still there
        assert request(port, f"/api/kernels/{kernel['id']}", "DELETE")[0] == 204
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_an_exam_server_loads_only_lab_and_the_clock_and_no_config_the_student_writes(tmp_path):
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    # what a student could write in the exam home (its ~/.jupyter) before a reopen
    (home / ".jupyter/jupyter_server_config.json").write_text(
        json.dumps({"ContentsManager": {"allow_hidden": True}})
    )
    (home / ".hidden.txt").write_text("x")
    seat = ExamSeat("mlmeca-2025", "final", home)
    config = exam_config("")
    path = config["JUPYTER_CONFIG_PATH"].split(os.pathsep)
    configured = configured_server_extensions([*path, *ENV_CONFIG_PATH, *SYSTEM_CONFIG_PATH])
    assert "nbgrader.server_extensions.validate_assignment" in configured  # installed here
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), "HOME": str(home), **config}
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}"]
    command += ["--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}"]
    command += [f"--ServerApp.root_dir={home}", *plan_exam_args(seat, (), configured)]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_up(port, server)
        said = (tmp_path / "server.log").read_text()
        assert request(port, "/lab")[0] == 200, said[-2000:]
        assert request(port, "/api/contents/.hidden.txt")[0] == 404  # the student's file unread
        # nbgrader's validation (a kernel outside the exam kernels), its assignment list,
        # nbgitpuller, the language servers, the resource usage, the classic notebook: off
        for route in ("/assignments/validate", "/assignments", "/git-pull", "/lsp/status",
                      "/api/metrics/v1", "/tree"):  # fmt: skip
            assert request(port, route)[0] == 404, route
        assert "nbgrader" not in said and "jupyter_lsp" not in said, said[-2000:]
        settings = home / ".jupyter/lab/user-settings"
        status = request(port, "/lab/api/settings/@jupyterlab/apputils-extension:themes", "PUT",
                         {"raw": '{"theme": "JupyterLab Dark"}'})  # fmt: skip
        assert status[0] == 204 and settings.is_dir(), status
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
