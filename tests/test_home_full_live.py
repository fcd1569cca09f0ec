"""A full home never stops a server from starting: a real hub, homes on a tiny full ext4 disk.

The report: one student filled the disk that holds every home; the next
students' first start failed in the hub's pre-spawn copy of the course
notebook (``[Errno 28]``), and the student who filled it could not restart
(jupyter-server died writing its runtime file; the hub waited 180 s). Here
the homes are on a 4 MiB ext4 loop device, filled up, and the hub runs the
rendered configuration's hooks: :class:`coursehub.spawn.runtimedir.ServerRuntime`
and the demo's notebook copy (:func:`coursehub.demo.seed.copy_notebook_hook`).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest
import requests

from coursehub.demo.seed import NOTEBOOK_FILE
from helpers import free_port, wait_until
from hubfixture import RunningHub, find_proxy
from loopfs import fill, loop_mount

pytestmark = [pytest.mark.integration, pytest.mark.root]

HUB_ID = "homefull"
EXTRA = """
from coursehub.demo.seed import copy_notebook_hook
from coursehub.spawn.runtimedir import ServerRuntime
from coursehub.spawn.spawner import chain_hooks

server_runtime = ServerRuntime("local", hub_id={hub_id!r}, runtime_dir={run!r})
c.Spawner.pre_spawn_hook = chain_hooks(copy_notebook_hook, server_runtime)
c.Spawner.post_stop_hook = server_runtime.release
c.Spawner.start_timeout = 120
c.JupyterHub.load_roles.append(
    {{"name": "home-test", "scopes": ["access:servers"], "services": ["coursehub-test"]}}
)
"""


@pytest.fixture(scope="module")
def full_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningHub, list[str]]]:
    """A hub whose homes are on a full 4 MiB ext4; the users' homes were made before it filled."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    workdir = tmp_path_factory.mktemp("homefull")
    users = [f"chfull{uuid.uuid4().hex[:6]}" for _ in range(2)]
    with loop_mount(workdir, 4) as disk:
        (workdir / "home").symlink_to(disk)
        for user in users:
            (disk / user).mkdir()
        assert fill(disk / users[0]) > 0
        ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
        hub = RunningHub(workdir, proxy, ports)
        hub.extra_config = EXTRA.format(hub_id=HUB_ID, run=str(workdir / "run"))
        hub.start()
        try:
            yield hub, users
        finally:
            hub.stop()
            shutil.rmtree(disk / users[0], ignore_errors=True)


def api(hub: RunningHub, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"token {hub.admin_token}"}
    return requests.request(method, hub.api_url + path, headers=headers, timeout=60, **kwargs)


def server_api(hub: RunningHub, user: str, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"token {hub.admin_token}"}
    url = f"{hub.url}/user/{user}/api/{path}"
    return requests.request(method, url, headers=headers, timeout=60, **kwargs)


def start(hub: RunningHub, user: str) -> None:
    api(hub, "POST", f"/users/{user}")
    answer = api(hub, "POST", f"/users/{user}/server")
    assert answer.status_code in (201, 202), answer.text

    def ready() -> bool:
        model = api(hub, "GET", f"/users/{user}").json()
        server = model.get("servers", {}).get("")
        assert server is not None or model.get("pending"), f"server gone:\n{hub.log_tail()}"
        return bool(server and server.get("ready"))

    wait_until(ready, timeout_s=150, interval_s=0.5, what=f"{user}'s server")


def test_the_student_who_filled_the_disk_starts_and_deletes_files(full_hub):
    hub, (filler, _) = full_hub
    start(hub, filler)
    run = hub.workdir / "run" / f"servers-{HUB_ID}" / f"jupyter-{filler}"
    assert any(p.name.startswith("jpserver-") for p in run.iterdir())
    assert f"home {hub.workdir / 'home' / filler} is full" in hub.log_tail(20_000)
    kernel = server_api(hub, filler, "POST", "kernels", json={"name": "python3"})
    assert kernel.status_code == 201, f"{kernel.text}\n{hub.log_tail(6000)}"
    assert server_api(hub, filler, "DELETE", "contents/fill.bin").status_code == 204
    note = {"type": "file", "format": "text", "content": "room again"}
    saved = server_api(hub, filler, "PUT", "contents/notes.txt", json=note)
    assert saved.status_code == 201, saved.text
    assert api(hub, "DELETE", f"/users/{filler}/server").status_code in (202, 204)
    wait_until(lambda: not run.exists(), timeout_s=60, interval_s=0.5, what="runtime folder gone")


def test_another_student_on_the_full_disk_starts_without_the_course_notebook(full_hub):
    hub, (filler, other) = full_hub
    if not (hub.workdir / "home" / filler / "fill.bin").exists():
        fill(hub.workdir / "home" / filler)  # the disk is full again whatever ran before
    start(hub, other)
    listing = server_api(hub, other, "GET", "contents")
    assert listing.status_code == 200, listing.text
    assert NOTEBOOK_FILE not in [item["name"] for item in listing.json()["content"]]
    assert api(hub, "DELETE", f"/users/{other}/server").status_code in (202, 204)
