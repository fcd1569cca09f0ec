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


def _v2_job(tmp_path: Path, files: dict[str, str]):  # type: ignore[no-untyped-def]
    """A JobCgroup on a fake cgroup v2 directory holding ``files`` (as the kernel writes them)."""
    from coursehub.resources.cgroups import JobCgroup, JobCgroupPlan

    job = tmp_path / "coursehub-servers-hub" / "jupyter-ann"
    job.mkdir(parents=True)
    for name, text in files.items():
        (job / name).write_text(text)
    return JobCgroup(JobCgroupPlan(version=2, job_dirs=(job,), writes=()))


V2_OOM = {
    "cpu.stat": "usage_usec 9000000\nuser_usec 8000000\nsystem_usec 1000000\n"
    "nr_periods 40\nnr_throttled 12\nthrottled_usec 2500000\n",
    "memory.events": "low 0\nhigh 0\nmax 57\noom 2\noom_kill 1\noom_group_kill 0\n",
    "memory.peak": f"{2**30}\n",
    "memory.max": f"{2**30}\n",
}


def test_a_v2_server_cgroups_counters_give_the_oom_reason(tmp_path):
    from coursehub.resources.cgroups import CgroupStats
    from coursehub.spawn.oomreason import cgroup_memory_state
    from coursehub.spawn.serverexit import describe_server_exit

    stats = _v2_job(tmp_path, V2_OOM).stats()
    assert stats == CgroupStats(
        nr_throttled=12, throttled_s=2.5, mem_peak_bytes=2**30, oom_kills=1, mem_limit_hits=57
    )
    reason = server_oom_reason(-signal.SIGKILL, cgroup_memory_state(stats, 2**30))
    assert reason is not None
    assert reason.startswith(f"{REASON} (peak reached: 1.0 GiB)")
    assert "out of memory (it reached its memory limit of 1.0 GiB)" in describe_server_exit(
        -signal.SIGKILL, stats, 2**30
    )


def test_a_v2_kernel_without_memory_peak_still_names_the_limit(tmp_path):
    from coursehub.spawn.oomreason import cgroup_memory_state

    files = {**V2_OOM}
    del files["memory.peak"]  # Linux < 5.19
    stats = _v2_job(tmp_path, files).stats()
    assert stats.mem_peak_bytes is None and stats.oom_kills == 1
    reason = server_oom_reason(-signal.SIGKILL, cgroup_memory_state(stats, 2**30))
    assert reason is not None and "memory limit of 1.0 GiB (peak reached: unknown)" in reason


def test_a_v2_server_killed_without_an_oom_kill_gets_no_oom_reason(tmp_path):
    from coursehub.spawn.oomreason import cgroup_memory_state

    files = {**V2_OOM, "memory.events": "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n"}
    stats = _v2_job(tmp_path, files).stats()
    assert stats.oom_kills == 0 and stats.mem_limit_hits == 3
    assert server_oom_reason(-signal.SIGKILL, cgroup_memory_state(stats, 2**30)) is None
