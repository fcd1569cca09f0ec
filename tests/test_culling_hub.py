"""jupyterhub-idle-culler on a real hub leaves a busy kernel alone and culls an idle server.

The report (jupyterhub/jupyterhub-idle-culler#10): a kernel computing
silently, its browser tab closed, sends no message, so its server looked
idle and was culled with its computation. The single-user servers here run
the coursehub.spawn.busyactivity extension as the rendered hub config does,
with short intervals so that the test takes a minute, not an hour.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator

import pytest
import requests

from coursehub.contract import SERVER_ARG
from helpers import free_port, wait_until
from hubfixture import RunningHub, find_proxy

#: The culler's timeout (s): a server without activity this long is stopped.
TIMEOUT_S = 20
#: The culler's own scopes, as in the rendered hub config (coursehub.hub.render).
CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]

EXTRA = f"""
import sys
c.Spawner.args = c.Spawner.args + [{SERVER_ARG!r}, "--BusyKernelActivity.interval_s=1"]
# the server reports its last activity to the hub every 2 s (JupyterHub's default: 300 s)
c.Spawner.environment = {{"JUPYTERHUB_ACTIVITY_INTERVAL": "2"}}
c.JupyterHub.last_activity_interval = 3
c.JupyterHub.services.append({{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                "--timeout={TIMEOUT_S}", "--cull-every=3"],
}})
c.JupyterHub.load_roles.append(
    {{"name": "idle-culler", "scopes": {CULLER_SCOPES!r}, "services": ["idle-culler"]}}
)
# the test reaches the users' servers (kernels) with its service token
c.JupyterHub.load_roles.append(
    {{"name": "cull-test", "scopes": ["access:servers"], "services": ["coursehub-test"]}}
)
"""


@pytest.fixture(scope="module")
def culled_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    pytest.importorskip("jupyterhub_idle_culler")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(tmp_path_factory.mktemp("cullhub"), proxy, ports, extra_config=EXTRA)
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def _start_server(hub: RunningHub, user: str) -> None:
    """Create ``user``, start the default server, wait until it is ready."""
    admin = {"Authorization": f"token {hub.admin_token}"}
    requests.post(f"{hub.api_url}/users/{user}", headers=admin, timeout=30)
    answer = requests.post(f"{hub.api_url}/users/{user}/server", headers=admin, timeout=60)
    assert answer.status_code in (201, 202), answer.text
    wait_until(lambda: _ready(hub, user), timeout_s=120, interval_s=0.5, what=f"{user}'s server")


def _ready(hub: RunningHub, user: str) -> bool:
    admin = {"Authorization": f"token {hub.admin_token}"}
    model = requests.get(f"{hub.api_url}/users/{user}", headers=admin, timeout=30).json()
    return bool(model.get("servers", {}).get("", {}).get("ready"))


async def _compute_silently_and_close_the_tab(url: str, token: str) -> None:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
    header = {
        "msg_id": uuid.uuid4().hex,
        "username": "student",
        "session": uuid.uuid4().hex,
        "msg_type": "execute_request",
        "version": "5.3",
    }
    content = {
        "code": "import time\ntime.sleep(600)",
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
def test_the_culler_leaves_a_busy_kernel_alone_and_culls_an_idle_server(culled_hub):
    hub = culled_hub
    busy, idle = f"chcullbusy{uuid.uuid4().hex[:6]}", f"chcullidle{uuid.uuid4().hex[:6]}"
    _start_server(hub, busy)
    _start_server(hub, idle)
    headers = {"Authorization": f"token {hub.admin_token}"}
    kernels = f"{hub.url}/user/{busy}/api/kernels"
    kernel = requests.post(kernels, headers=headers, json={"name": "python3"}, timeout=60).json()
    channels = kernels.replace("http", "ws", 1) + f"/{kernel['id']}/channels"
    asyncio.run(_compute_silently_and_close_the_tab(channels, hub.admin_token))
    state = f"{kernels}/{kernel['id']}"
    wait_until(
        lambda: (
            requests.get(state, headers=headers, timeout=10).json()["execution_state"] == "busy"
        ),
        timeout_s=60,
        interval_s=0.5,
        what="the kernel to be busy",
    )
    busy_since = time.monotonic()

    wait_until(
        lambda: not _ready(hub, idle),
        timeout_s=TIMEOUT_S + 60,
        interval_s=1,
        what="the idle server to be culled",
    )
    assert f"Culling server {idle}" in hub.log_tail(200_000)
    # the busy server has now been without a browser for longer than the timeout, twice over
    wait_until(
        lambda: time.monotonic() - busy_since > 2 * TIMEOUT_S + 5, timeout_s=120, interval_s=1
    )
    assert _ready(hub, busy), hub.log_tail()
    answer = requests.get(state, headers=headers, timeout=10)
    assert answer.json()["execution_state"] == "busy"
    requests.delete(state, headers=headers, timeout=30)
