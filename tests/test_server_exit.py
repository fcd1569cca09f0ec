"""A server killed with SIGKILL: the next reload says so and why, and Start gives a new one.

The report (jupyterhub/systemdspawner#87, #7): after ``kill -9`` of a
student's server, ``/user/<name>/lab`` answered 503 "Your server appears to
be down" and Start led back to the same 503 until the hub's periodic poll
(``Spawner.poll_interval``, 30 s) noticed. Here the hub runs coursehub's
cgroup spawner (:mod:`coursehub.spawn.serverexit` watches its process) with
its periodic poll at an hour, so only the watch can notice within the wait.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator

import pytest
import requests

from coursehub.resources.cgroups import CgroupStats
from coursehub.spawn.serverexit import StopNotices, describe_server_exit
from helpers import free_port, wait_until
from hubfixture import RunningHub, find_proxy

#: The periodic poll is out of the way: the watch alone must notice the death.
EXTRA = """
from coursehub.spawn.hubpages import template_dir
from coursehub.spawn.serverexit import server_stop_notices
c.JupyterHub.spawner_class = "coursehub.spawn.cgroupspawner.CgroupSimpleLocalProcessSpawner"
c.CgroupSimpleLocalProcessSpawner.home_dir_template = c.SimpleLocalProcessSpawner.home_dir_template
c.Spawner.poll_interval = 3600
c.JupyterHub.template_paths = [template_dir()]
c.JupyterHub.template_vars = {"server_stop_notices": server_stop_notices}
"""
#: Seconds within which a dead server's reload must show "Server not running".
NOTICED_WITHIN_S = 10


@pytest.fixture(scope="module")
def exit_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(tmp_path_factory.mktemp("exithub"), proxy, ports, extra_config=EXTRA)
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def _admin(hub: RunningHub) -> dict[str, str]:
    return {"Authorization": f"token {hub.admin_token}"}


def _server(hub: RunningHub, user: str) -> dict[str, object]:
    model = requests.get(
        f"{hub.api_url}/users/{user}", headers=_admin(hub), params={"include_stopped_servers": "0"}
    ).json()
    server: dict[str, object] = model.get("servers", {}).get("", {})
    return server


def _wait_ready(hub: RunningHub, user: str) -> None:
    wait_until(lambda: bool(_server(hub, user).get("ready")), timeout_s=120, interval_s=0.5)


def _signed_in(hub: RunningHub, user: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{hub.url}/hub/login", timeout=30)
    answer = session.post(
        f"{hub.url}/hub/login",
        data={"username": user, "password": hub.password, "_xsrf": session.cookies.get("_xsrf")},
        allow_redirects=False,
        timeout=60,
    )
    assert answer.status_code == 302, answer.text
    return session


def _server_pid(hub: RunningHub, user: str) -> int:
    state = _server(hub, user).get("state") or {}
    assert isinstance(state, dict) and state.get("pid"), f"no pid in the server's state: {state}"
    return int(state["pid"])


@pytest.mark.integration
def test_killed_server_is_noticed_and_restarted(exit_hub: RunningHub) -> None:
    user = f"exit{uuid.uuid4().hex[:8]}"
    session = _signed_in(exit_hub, user)
    try:
        started = session.get(f"{exit_hub.url}/hub/spawn/{user}", timeout=60)
        assert started.status_code == 200, started.text[:500]
        _wait_ready(exit_hub, user)
        assert session.get(f"{exit_hub.url}/user/{user}/lab", timeout=60).status_code == 200

        os.kill(_server_pid(exit_hub, user), signal.SIGKILL)
        page: dict[str, requests.Response] = {}

        def reload_says_stopped() -> bool:
            page["lab"] = session.get(f"{exit_hub.url}/user/{user}/lab", timeout=30)
            return page["lab"].status_code == 424

        wait_until(reload_says_stopped, timeout_s=NOTICED_WITHIN_S, interval_s=0.5)
        text = page["lab"].text
        assert "Server not running" in text
        assert "stopped unexpectedly: killed by signal 9 (SIGKILL)" in text

        restarted = session.get(f"{exit_hub.url}/hub/spawn/{user}", timeout=60)
        assert restarted.status_code == 200, restarted.text[:500]
        _wait_ready(exit_hub, user)
        assert session.get(f"{exit_hub.url}/user/{user}/lab", timeout=60).status_code == 200

        # a stop the student asked for is no accident: no notice
        stop = requests.delete(f"{exit_hub.api_url}/users/{user}/server", headers=_admin(exit_hub))
        assert stop.status_code in (202, 204), stop.text
        wait_until(lambda: not _server(exit_hub, user), timeout_s=60, interval_s=0.5)
        stopped = session.get(f"{exit_hub.url}/user/{user}/lab", timeout=30)
        assert stopped.status_code == 424
        assert "stopped unexpectedly" not in stopped.text
    finally:
        requests.delete(f"{exit_hub.api_url}/users/{user}/server", headers=_admin(exit_hub))
        wait_until(lambda: not _server(exit_hub, user), timeout_s=60, interval_s=0.5)
        requests.delete(f"{exit_hub.api_url}/users/{user}", headers=_admin(exit_hub))


@pytest.fixture(scope="module")
def keeping_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    """A hub whose servers outlive its restarts (the rendered production setting)."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    extra = EXTRA + "c.JupyterHub.cleanup_servers = False\n"
    hub = RunningHub(tmp_path_factory.mktemp("keephub"), proxy, ports, extra_config=extra)
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


@pytest.mark.integration
def test_a_server_reattached_after_a_hub_restart_is_watched_too(keeping_hub: RunningHub) -> None:
    user = f"exit{uuid.uuid4().hex[:8]}"
    session = _signed_in(keeping_hub, user)
    try:
        assert session.get(f"{keeping_hub.url}/hub/spawn/{user}", timeout=60).status_code == 200
        _wait_ready(keeping_hub, user)
        pid = _server_pid(keeping_hub, user)
        # the hub alone stops (RunningHub.stop would kill its servers too)
        assert keeping_hub.process is not None
        keeping_hub.process.send_signal(signal.SIGTERM)
        keeping_hub.process.wait(timeout=30)
        keeping_hub.start()  # the server is not the new hub's child
        _wait_ready(keeping_hub, user)
        assert _server_pid(keeping_hub, user) == pid

        os.kill(pid, signal.SIGKILL)
        page: dict[str, requests.Response] = {}

        def reload_says_stopped() -> bool:
            page["lab"] = session.get(f"{keeping_hub.url}/user/{user}/lab", timeout=30)
            return page["lab"].status_code == 424

        wait_until(reload_says_stopped, timeout_s=NOTICED_WITHIN_S, interval_s=0.5)
        assert "Your server stopped unexpectedly" in page["lab"].text
    finally:
        requests.delete(f"{keeping_hub.api_url}/users/{user}/server", headers=_admin(keeping_hub))
        wait_until(lambda: not _server(keeping_hub, user), timeout_s=60, interval_s=0.5)
        requests.delete(f"{keeping_hub.api_url}/users/{user}", headers=_admin(keeping_hub))


@pytest.mark.parametrize(
    ("status", "stats", "expected"),
    [
        (-9, CgroupStats(oom_kills=1), "out of memory (it reached its memory limit of 1.0 GiB)"),
        (-9, CgroupStats(oom_kills=None, mem_limit_hits=3), "out of memory"),
        (-9, CgroupStats(oom_kills=0, mem_limit_hits=3), "killed by signal 9 (SIGKILL)"),
        (-11, None, "killed by signal 11 (SIGSEGV)"),
        (3, None, "it exited with status 3"),
        (0, None, "Your server stopped unexpectedly."),
    ],
)
def test_describe_server_exit(status: int, stats: CgroupStats | None, expected: str) -> None:
    assert expected in describe_server_exit(status, stats, 1024**3)


def test_stop_notices_are_per_user_until_cleared() -> None:
    notices = StopNotices()
    notices.record("alice", "", "gone")
    notices.record("bob", "gpu", "oom")

    class User:
        name = "alice"

    assert notices.for_user(User()) == {"": "gone"}
    assert notices.for_user(None) == {}
    notices.clear("alice", "")
    assert notices.for_user(User()) == {}
