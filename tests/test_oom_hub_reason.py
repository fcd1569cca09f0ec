"""A server stopped by the OOM killer: the spawner's poll names the limit, the hub's pages show it.

The reason from a real cgroup as root (a process standing for the server,
started the way the spawner starts one, allocating past the limit), and the
templates rendered the way JupyterHub 6 loads them (``app.py``,
``init_tornado_settings``: ``templates/`` is JupyterHub's own directory).
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PrefixLoader
from jupyterhub._data import DATA_FILES_PATH
from markupsafe import escape

from coursehub.meter.hubhook import hub_usage_dir
from coursehub.resources.cgroupfs import MemoryState
from coursehub.spawn.hubpages import template_dir
from coursehub.spawn.oomreason import server_oom_reason
from test_spawner_cgroup import make_spawner, start_in, test_parent  # noqa: F401

HOG = "x = b'x' * (400 * 1024**2)"
REASON = "Your server was stopped because it went past the course's memory limit of 1.0 GiB"


@pytest.mark.parametrize(
    ("status", "state", "told"),
    [
        (-signal.SIGKILL, MemoryState(2**30, 2**30, 1, 9), True),
        (-signal.SIGKILL, MemoryState(2**30, 2**30, 0, 0), False),  # stopped by the hub
        (0, MemoryState(2**30, 2**30, 1, 9), False),  # a kernel was killed, the server exited
        (None, MemoryState(2**30, 2**30, 1, 9), False),
    ],
)
def test_the_reason_is_given_for_a_server_killed_while_the_oom_counter_rose(status, state, told):
    reason = server_oom_reason(status, state)
    assert (reason is not None) is told
    if told:
        assert reason.startswith(REASON) and "peak reached: 1.0 GiB" in str(reason)
        assert "teaching team" in str(reason)


@pytest.mark.root
def test_the_spawners_poll_tells_an_oom_killed_server(tmp_path, test_parent):  # noqa: F811
    spawner = make_spawner(tmp_path, username="zzoomsrv", cgroup_parent=test_parent)
    spawner.mem_limit = 100 * 1024**2
    spawner._cgroup = spawner.ensure_cgroup()
    assert spawner._cgroup is not None
    dirs = spawner._cgroup.plan.job_dirs
    spawner.proc = start_in(spawner, "python3", "-c", HOG)
    assert spawner.proc.wait(timeout=60) == -signal.SIGKILL
    spawner.pid = spawner.proc.pid
    status = asyncio.run(spawner.poll())
    assert status == -signal.SIGKILL
    assert str(spawner.stop_reason).startswith(
        "Your server was stopped because it went past the course's memory limit of 100.0 MiB"
    )
    assert not any(d.exists() for d in dirs)  # the cgroup is removed after being read
    closing = [  # the usage record carries the kill to the team's servers page
        json.loads(line)
        for path in hub_usage_dir(tmp_path / "run", spawner.hub_id).rglob("*")
        if path.is_file()
        for line in path.read_text().splitlines()
        if '"close"' in line
    ]
    assert [r["exit_reason"] for r in closing] == ["stopped; 1 OOM kill"]


def _render(name: str, **context: object) -> str:
    default = str(Path(DATA_FILES_PATH) / "templates")
    loader = ChoiceLoader(
        [
            PrefixLoader({"templates": FileSystemLoader([default])}, "/"),
            FileSystemLoader([template_dir(), default]),
        ]
    )
    env = Environment(loader=loader, autoescape=True)
    base = {"static_url": lambda *a, **k: "", "base_url": "/hub/", "logout_url": "/hub/logout"}
    return env.get_template(name).render(**base, **context)


def test_the_home_page_and_not_running_page_show_the_reason():
    spawner = SimpleNamespace(stop_reason=REASON + " <b>")
    user = SimpleNamespace(name="p2501001", spawner=spawner, spawners={"": spawner}, admin=False)
    home = _render(
        "home.html", user=user, default_server=SimpleNamespace(active=False), url="/hub/spawn"
    )
    assert f'id="coursehub-stop-reason">{escape(REASON)} &lt;b&gt;</div>' in home
    assert "Start" in home  # JupyterHub's own page is still there
    stopped = _render("not_running.html", user=user, server_name="", spawn_url="/hub/spawn")
    assert escape(REASON) in stopped and "Server not running" in stopped
    running = _render("home.html", user=user, default_server=SimpleNamespace(active=True), url="/")
    assert "coursehub-stop-reason" not in running
    plain = SimpleNamespace(spawner=SimpleNamespace(), spawners={"": SimpleNamespace()}, name="u")
    assert "coursehub-stop-reason" not in _render(
        "home.html", user=plain, default_server=SimpleNamespace(active=False), url="/"
    )
