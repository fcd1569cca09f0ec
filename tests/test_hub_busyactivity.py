"""A busy kernel counts as activity on a single-user server (coursehub.spawn.busyactivity)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from coursehub.contract import SERVER_ARG
from coursehub.spawn.busyactivity import busy_activity, plan_busy_since
from helpers import free_port, wait_until

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("states", "before", "expected"),
    [
        ({"k1": "busy"}, {}, {"k1": T0}),
        ({"k1": "busy"}, {"k1": T0 - 5 * MIN}, {"k1": T0 - 5 * MIN}),
        ({"k1": "idle"}, {"k1": T0 - 5 * MIN}, {}),
        ({"k1": "busy", "k2": "starting"}, {"k2": T0 - MIN}, {"k1": T0}),
        ({}, {"gone": T0 - MIN}, {}),
    ],
    ids=["becomes-busy", "stays-busy", "goes-idle", "only-busy-ones", "shut-down"],
)
def test_each_poll_knows_since_when_each_kernel_is_busy(states, before, expected):
    assert plan_busy_since(states, before, T0) == expected


@pytest.mark.parametrize(
    ("busy_since", "max_busy_s", "counts"),
    [
        ({}, 3600, False),
        ({"k1": T0 - 10 * MIN}, 3600, True),
        ({"k1": T0 - 90 * MIN}, 3600, False),
        ({"k1": T0 - 90 * MIN, "k2": T0 - MIN}, 3600, True),
        ({"k1": T0 - 9000 * MIN}, 0, True),
    ],
    ids=["no-kernel-busy", "busy", "stuck-too-long", "one-of-two", "no-limit"],
)
def test_a_busy_kernel_counts_as_activity_up_to_the_limit(busy_since, max_busy_s, counts):
    assert busy_activity(busy_since, T0, max_busy_s) is counts


@pytest.fixture
def jupyter_server(tmp_path: Path):
    """A real jupyter server with the extension enabled as the hub config does (every 0.5 s)."""
    port, token = free_port(), uuid.uuid4().hex
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
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
        "--BusyKernelActivity.interval_s=0.5",
        SERVER_ARG,
    ]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115
    server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    session = requests.Session()
    session.headers["Authorization"] = f"token {token}"
    try:

        def up() -> bool:
            if server.poll() is not None:
                raise AssertionError((tmp_path / "server.log").read_text())
            try:
                session.get(f"{base}/api/status", timeout=5).raise_for_status()
            except requests.RequestException:
                return False
            return True

        wait_until(up, timeout_s=60, interval_s=0.2, what="the jupyter server to answer")
        yield base, token, session, tmp_path / "server.log"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        session.close()


async def _execute_and_close_tab(base: str, token: str, kernel_id: str, code: str) -> None:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    url = base.replace("http", "ws") + f"/api/kernels/{kernel_id}/channels"
    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
    header = {
        "msg_id": uuid.uuid4().hex,
        "username": "student",
        "session": uuid.uuid4().hex,
        "msg_type": "execute_request",
        "version": "5.3",
    }
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
    }
    message = {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "channel": "shell",
        "content": content,
    }
    await ws.write_message(json.dumps(message))
    await asyncio.sleep(1)
    ws.close()  # the student closes the browser tab


@pytest.mark.integration
@pytest.mark.slow
def test_last_activity_moves_while_a_kernel_computes_silently_with_no_tab_open(jupyter_server):
    base, token, session, log = jupyter_server
    kernel = session.post(f"{base}/api/kernels", json={"name": "python3"}, timeout=30).json()
    state = f"{base}/api/kernels/{kernel['id']}"
    asyncio.run(_execute_and_close_tab(base, token, kernel["id"], "import time\ntime.sleep(60)"))
    wait_until(
        lambda: session.get(state, timeout=10).json()["execution_state"] == "busy",
        timeout_s=60,
        interval_s=0.2,
        what="the kernel to be busy",
    )
    assert "busy kernels count as activity" in log.read_text()

    def last_activity() -> str:
        return str(session.get(f"{base}/api/status", timeout=10).json()["last_activity"])

    first = last_activity()  # /api/status itself is not activity
    later = wait_until(
        lambda: (value := last_activity()) > first and value,
        timeout_s=30,
        interval_s=0.2,
        what="last_activity to move",
    )
    assert later > first
    assert session.get(state, timeout=10).json()["execution_state"] == "busy"
    session.delete(state, timeout=30)
