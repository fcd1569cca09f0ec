"""A kernel stopped for memory says so in its cell; the server and other kernels live on.

Pure rules from tables and fake cgroup trees, then the real thing as root: a
jupyter server with coursehub's extension inside a memory cgroup of 400 MiB,
two kernels, one cell that allocates 1 GiB, seen through the server's REST
API and kernel websockets (both of Jupyter Server's websocket protocols: the
JSON one and JupyterLab 4's ``v1.kernel.websocket.jupyter.org``), and in Chromium: JupyterLab
shows the error under the cell that ran.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
import websocket
from jupyter_server.services.kernels.connection.base import (
    deserialize_msg_from_ws_v1,
    serialize_msg_to_ws_v1,
)

from coursehub.contract import SERVER_ARG
from coursehub.resources.cgroupfs import CgroupMount, MemoryState, read_memory_state
from coursehub.spawn.oomnotice import KERNEL_OOM_SCORE_ADJ, OomWatch
from coursehub.spawn.oomreason import OOM_ENAME, killed_by_oom, oom_error_content
from helpers import free_port, wait_until

LIMIT = 400 * 1024**2
STATE = MemoryState(limit_bytes=2**30, peak_bytes=2**30, oom_kills=1, limit_hits=7)


@pytest.mark.parametrize(
    ("returncode", "seen", "state", "expected"),
    [
        (-9, 0, STATE, True),
        (-9, 1, STATE, False),  # the counter did not move: someone else's kill -9
        (1, 0, STATE, False),  # a crash, not the OOM killer
        (-15, 0, STATE, False),
        (None, 0, STATE, False),
        (-9, 6, MemoryState(2**30, None, None, 7), True),  # no oom_kill line: failcnt
        (-9, 0, MemoryState(None, None, None, None), False),
    ],
)
def test_a_kernel_killed_while_the_oom_counter_rose_was_killed_for_memory(
    returncode, seen, state, expected
):
    assert killed_by_oom(returncode, seen, state) is expected


def test_the_cell_error_names_the_limit_the_peak_and_what_to_do():
    content = oom_error_content(MemoryState(2**30, 1100 * 2**20, 1, 1))
    assert content["ename"] == OOM_ENAME
    assert "memory limit of 1.0 GiB" in content["evalue"]
    assert "peak reached: 1.1 GiB" in content["evalue"]
    text = "\n".join(content["traceback"])
    assert "free memory" in text and "smaller data" in text and "teaching team" in text
    unknown = oom_error_content(MemoryState(None, None, 1, 1))
    assert "limit of unknown" in unknown["evalue"]


def test_each_oom_kill_is_told_for_one_kernel_death_only():
    states = [MemoryState(LIMIT, 1, 0, 0), MemoryState(LIMIT, LIMIT, 1, 3)]
    watch = OomWatch(lambda: states[0])
    states.pop(0)
    assert watch.verdict(101, -9) == states[0]
    assert watch.verdict(101, -9) == states[0]  # a second tab on the same kernel
    assert watch.verdict(202, -9) is None  # another kernel killed by hand later
    assert watch.verdict(303, 0) is None


@pytest.mark.parametrize("version", [1, 2])
def test_memory_state_is_read_from_v1_and_v2_files(tmp_path, version):
    own = tmp_path / "srv"
    own.mkdir()
    files = {
        1: {
            "memory.limit_in_bytes": "1073741824",
            "memory.max_usage_in_bytes": "1073700000",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
            "memory.failcnt": "55",
        },
        2: {
            "memory.max": "1073741824",
            "memory.peak": "1073700000",
            "memory.events": "low 0\nhigh 0\nmax 55\noom 2\noom_kill 2\n",
        },
    }[version]
    for name, text in files.items():
        (own / name).write_text(text)
    state = read_memory_state(CgroupMount(version, tmp_path, "/srv"))
    assert state == MemoryState(1073741824, 1073700000, 2, 55)
    limitless = "9223372036854771712" if version == 1 else "max"
    (own / ("memory.limit_in_bytes" if version == 1 else "memory.max")).write_text(limitless)
    assert read_memory_state(CgroupMount(version, tmp_path, "/srv")).limit_bytes is None


class Server:
    """A jupyter server with coursehub's extensions in a memory cgroup, driven over HTTP."""

    def __init__(self, root: Path, procs_files: list[str]) -> None:
        self.token = uuid.uuid4().hex
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.sockets: list[websocket.WebSocket] = []
        command = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--allow-root",
            "--no-browser",
            f"--port={self.port}",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}",
            SERVER_ARG,
        ]

        def enter_cgroup() -> None:
            import os

            for procs in procs_files:
                with open(procs, "w") as handle:
                    handle.write(str(os.getpid()))

        self.log = open(root / "server.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            command, cwd=root, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=enter_cgroup
        )
        wait_until(self.ready, timeout_s=90, interval_s=0.2, what="the jupyter server")

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the server exited with {self.process.returncode}")
        try:
            return self.get("/api/status").status_code == 200
        except requests.ConnectionError:
            return False

    def get(self, path: str) -> requests.Response:
        return requests.get(self.url + path, headers=self.headers, timeout=10)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def start_kernel(self) -> str:
        answer = requests.post(self.url + "/api/kernels", headers=self.headers, timeout=60, json={})
        answer.raise_for_status()
        return str(answer.json()["id"])

    def stop(self) -> None:
        for socket in self.sockets:
            socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Kernel:
    """One kernel websocket, in Jupyter Server's JSON protocol or JupyterLab 4's binary v1."""

    def __init__(self, server: Server, kernel_id: str, v1: bool) -> None:
        self.v1 = v1
        self.socket = websocket.create_connection(
            f"ws://127.0.0.1:{server.port}/api/kernels/{kernel_id}/channels",
            header=[f"Authorization: token {server.token}"],
            subprotocols=["v1.kernel.websocket.jupyter.org"] if v1 else None,
            timeout=120,
        )
        server.sockets.append(self.socket)
        self.session = uuid.uuid4().hex

    def execute(self, code: str) -> str:
        msg_id = uuid.uuid4().hex
        msg = {
            "header": {
                "msg_id": msg_id,
                "msg_type": "execute_request",
                "session": self.session,
                "username": "test",
                "version": "5.3",
                "date": "",
            },
            "parent_header": {},
            "metadata": {},
            "content": {"code": code, "silent": False, "store_history": True},
        }
        if self.v1:
            pack = lambda part: json.dumps(part).encode()  # noqa: E731
            self.socket.send_binary(serialize_msg_to_ws_v1(msg, "shell", pack))
        else:
            self.socket.send(json.dumps({**msg, "channel": "shell"}))
        return msg_id

    def receive(self) -> dict[str, Any]:
        frame = self.socket.recv()
        if isinstance(frame, bytes):
            channel, parts = deserialize_msg_from_ws_v1(frame)
            header, parent, _, content = (json.loads(p) for p in parts[:4])
            return {
                "channel": channel,
                "header": header,
                "parent_header": parent,
                "content": content,
            }
        return dict(json.loads(frame))

    def messages_until(self, done: Any) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        while not seen or not done(seen[-1]):
            seen.append(self.receive())
        return seen

    def run(self, code: str) -> str:
        """Run ``code``; return what it printed."""
        msg_id = self.execute(code)
        out = self.messages_until(lambda m: _is(m, "status", msg_id, "idle"))
        return "".join(m["content"].get("text", "") for m in out if _is(m, "stream", msg_id))


def _is(msg: dict[str, Any], msg_type: str, parent: str, state: str | None = None) -> bool:
    if msg["header"]["msg_type"] != msg_type:
        return False
    if state is not None and msg["content"].get("execution_state") != state:
        return False
    return state == "restarting" or msg["parent_header"].get("msg_id") == parent


@pytest.fixture
def oom_server(cgroup_parent: str, tmp_path: Path) -> Iterator[tuple[Server, Any]]:
    from coursehub.resources.cgroups import JobCgroup

    cgroup = JobCgroup.create("oom-server", None, LIMIT, parent=cgroup_parent)
    server = Server(tmp_path, [str(p) for p in cgroup.procs_files])
    try:
        yield server, cgroup
    finally:
        server.stop()
        cgroup.remove()


def _kernel_pid(server: Server) -> set[int]:
    return {
        p.pid
        for p in psutil.Process(server.process.pid).children()
        if "ipykernel_launcher" in " ".join(p.cmdline())
    }


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("v1", [False, True], ids=["json", "v1"])
def test_a_cell_past_the_memory_limit_gets_an_error_naming_the_limit(oom_server, v1):
    server, cgroup = oom_server
    other = Kernel(server, server.start_kernel(), v1)
    other.run("y = 42")
    hog = Kernel(server, server.start_kernel(), v1)
    assert hog.run("print('ready')") == "ready\n"
    kernels = wait_until(lambda: len(_kernel_pid(server)) == 2 and _kernel_pid(server), 30, 0.2)
    for pid in kernels:  # kernels are the OOM killer's first choice, not the server
        score = Path(f"/proc/{pid}/oom_score_adj")  # written just after the kernel started
        what = f"kernel {pid}'s oom_score_adj {KERNEL_OOM_SCORE_ADJ}"
        wait_until(lambda s=score: int(s.read_text()) == KERNEL_OOM_SCORE_ADJ, 10, 0.2, what)
    assert int(Path(f"/proc/{server.process.pid}/oom_score_adj").read_text()) == 0

    msg_id = hog.execute("x = b'x' * (1024**3)")
    seen = hog.messages_until(lambda m: _is(m, "status", msg_id, "restarting"))
    errors = [m for m in seen if _is(m, "error", msg_id)]
    assert errors, [m["header"]["msg_type"] for m in seen]
    assert errors[0]["channel"] == "iopub"
    content = errors[0]["content"]
    assert content["ename"] == OOM_ENAME
    assert "memory limit of 400.0 MiB" in content["evalue"]
    peak = re.search(r"peak reached: ([0-9.]+) MiB", content["evalue"])
    assert peak is not None and 300 < float(peak.group(1)) <= 400
    assert (cgroup.stats().oom_kills or 0) >= 1

    assert server.process.poll() is None and server.get("/api/status").status_code == 200
    assert other.run("print(y)") == "42\n"


CHROMIUM = "/usr/bin/chromium"
NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "hog",
            "metadata": {},
            "outputs": [],
            "source": ["x = b'x' * (1024**3)"],
        }
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")
def test_jupyterlab_shows_the_error_in_the_cell_that_ran(oom_server, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    server, _ = oom_server
    (tmp_path / "oom.ipynb").write_text(json.dumps(NOTEBOOK))
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            page = browser.new_page()
            page.goto(f"{server.url}/lab/tree/oom.ipynb?token={server.token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=120_000)
            page.click(".jp-Cell .jp-InputArea-editor")
            page.click("jp-button[data-command='notebook:run-cell-and-select-next']")
            error = page.wait_for_selector(
                ".jp-Cell .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                timeout=120_000,
            )
            text = error.inner_text()
        finally:
            browser.close()
    assert f"{OOM_ENAME}: the kernel was stopped" in text
    assert "memory limit of 400.0 MiB" in text and "teaching team" in text
    assert server.process.poll() is None
