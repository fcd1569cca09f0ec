"""``coursehub demo`` guards: one demo per data dir, ports checked, nothing left, private files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from coursehub.demo.files import DATA_MODES, ensure_private_data, plan_mode_fixes
from coursehub.demo.lock import (
    DemoAlreadyRunningError,
    acquire_lock,
    parse_lock_holder,
    render_refusal,
)
from coursehub.demo.ports import PortInUseError, bind_problem, check_ports, pick_ports
from coursehub.demo.processes import (
    describe_status,
    proxy_of_pid_file,
    remove_stale_pid_files,
    stop_processes,
)
from helpers import WaitTimeoutError, free_port, wait_until

# --- one demo per data directory ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "holder"),
    [
        ('{"pid": 41, "port": 8200}', (41, 8200)),
        ('{"pid": 41}', (41, None)),
        ("", (None, None)),  # the holder has not written it yet
        ("not json", (None, None)),
        ("[1, 2]", (None, None)),
        ('{"pid": "41", "port": true}', (None, None)),
    ],
)
def test_the_lock_file_names_its_holder_or_nothing(text, holder):
    assert parse_lock_holder(text) == holder


def test_the_refusal_names_the_data_dir_pid_and_port(tmp_path):
    assert render_refusal(tmp_path, 41, 8200) == (
        f"a coursehub demo is already running on {tmp_path} (pid 41, port 8200); stop it first"
    )
    assert render_refusal(tmp_path, None, None).endswith(f"on {tmp_path}; stop it first")


def test_a_second_lock_on_a_data_dir_is_refused_naming_the_first(tmp_path):
    first = acquire_lock(tmp_path, 8200)
    try:
        with pytest.raises(DemoAlreadyRunningError, match=rf"\(pid {os.getpid()}, port 8200\)"):
            acquire_lock(tmp_path, 8300)
    finally:
        first.release()
    acquire_lock(tmp_path, 8300).release()
    assert stat.S_IMODE((tmp_path / "demo.lock").stat().st_mode) == 0o600


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_lock_ends_with_the_process_that_held_it(tmp_path, signum):
    code = (
        "import sys, time; from pathlib import Path; from coursehub.demo.lock import acquire_lock;"
        f"acquire_lock(Path({str(tmp_path)!r}), 8200); print('locked', flush=True); time.sleep(60)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            with pytest.raises(DemoAlreadyRunningError, match=f"pid {holder.pid}"):
                acquire_lock(tmp_path, 8300)
        finally:
            holder.send_signal(signum)
            holder.wait(30)
    acquire_lock(tmp_path, 8300).release()  # no stale lock


# --- ports --------------------------------------------------------------------------------


@pytest.fixture
def listening():
    """A socket listening on a port of 127.0.0.1 (another program, for the demo)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("what", ["public URL (--port)", "hub API", "proxy API", "formgrader 1"])
def test_a_taken_port_is_reported_with_its_holder(listening, what):
    with pytest.raises(PortInUseError) as caught:
        check_ports([("course app", "127.0.0.1", 1 + listening), (what, "127.0.0.1", listening)])
    message = str(caught.value)
    assert f"{what} 127.0.0.1:{listening} is already in use" in message
    if os.geteuid() == 0:  # others' sockets are visible to root only
        assert f"(pid {os.getpid()}, " in message
    assert ("--port" in message) == what.startswith("public")


@pytest.mark.parametrize(
    ("ip", "port", "why"),
    [
        ("192.0.2.1", 8000, "not an address of this machine"),  # TEST-NET-1, RFC 5737
        ("no-such-host.invalid", 8000, "cannot resolve"),
    ],
)
def test_a_port_that_cannot_be_bound_says_why(ip, port, why):
    assert why in (bind_problem(ip, port) or "")


def test_a_listening_port_blocks_the_wildcard_address_too(listening):
    assert bind_problem("0.0.0.0", listening) == "already in use"


def test_the_demo_ports_are_distinct_and_exclude_the_public_one():
    ports = pick_ports("127.0.0.1", 8000, 3)
    listed = [port for _what, _ip, port in ports.listening()]
    assert len(listed) == 7 == len(set(listed)) and listed[0] == 8000
    assert [what for what, _ip, _port in ports.listening()][-3:] == [
        "formgrader 1",
        "formgrader 2",
        "formgrader 3",
    ]


@pytest.mark.parametrize(
    ("status", "text"),
    [(0, "status 0"), (1, "status 1"), (-9, "killed by SIGKILL"), (-15, "killed by SIGTERM")],
)
def test_how_the_hub_ended_is_said_in_words(status, text):
    assert describe_status(status) == text


# --- processes left by a hub ------------------------------------------------------------

ORPHAN_MAKER = """
import os, subprocess, sys, time
from coursehub.demo.processes import become_subreaper, descendants, stop_processes
assert become_subreaper()
# a "hub" that starts a "proxy" in its own session, then dies
hub = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.Popen("
                        "[sys.executable, '-c', 'import time; time.sleep(60)'], "
                        "start_new_session=True, stdout=subprocess.DEVNULL, "
                        "stderr=subprocess.DEVNULL)"])
hub.wait()
time.sleep(0.5)
adopted = [p for p in descendants(os.getpid()) if p.ppid() == os.getpid()]
print(len(adopted), len(stop_processes(adopted, 5.0)), len(descendants(os.getpid())))
"""


def test_the_orphans_of_a_dead_hub_are_adopted_and_stopped_by_the_demo():
    if sys.platform != "linux":
        pytest.skip("PR_SET_CHILD_SUBREAPER is Linux's")
    out = subprocess.run(
        [sys.executable, "-c", ORPHAN_MAKER], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "0"]  # adopted, stopped, none left


@pytest.fixture
def fake_proxy():
    """A process whose command line names configurable-http-proxy."""
    code = "import time; time.sleep(60)"
    with subprocess.Popen([sys.executable, "-c", code, "configurable-http-proxy"]) as process:
        yield process
        process.kill()


def test_a_proxy_pid_file_names_only_a_proxy(tmp_path, fake_proxy):
    pid_file = tmp_path / "proxy.pid"
    pid_file.write_text(str(fake_proxy.pid))
    assert [p.pid for p in proxy_of_pid_file(pid_file)] == [fake_proxy.pid]
    pid_file.write_text(str(os.getpid()))  # a reused pid: not a proxy, never stopped
    assert proxy_of_pid_file(pid_file) == []
    for text in ("", "garbage", "999999999"):
        pid_file.write_text(text)
        assert proxy_of_pid_file(pid_file) == []


def test_a_left_proxy_is_stopped_and_its_stale_pid_file_removed(tmp_path, fake_proxy):
    pid_file = tmp_path / "proxy.pid"
    pid_file.write_text(str(fake_proxy.pid))
    remove_stale_pid_files([pid_file])
    assert pid_file.exists()  # its process still runs
    assert [p.pid for p in stop_processes(proxy_of_pid_file(pid_file), 5.0)] == [fake_proxy.pid]
    assert not psutil.pid_exists(fake_proxy.pid)  # stopped and reaped
    remove_stale_pid_files([pid_file])
    assert not pid_file.exists()


# --- private data files -------------------------------------------------------------------

OLD_VERSION_MODES = {
    ".": 0o755,
    "catalog.sqlite": 0o644,
    "catalog.sqlite-wal": 0o644,
    "catalog.sqlite-shm": 0o644,
    "jupyterhub.sqlite": 0o644,
    "jupyterhub_cookie_secret": 0o600,
    "demo-secrets.json": 0o600,
    "hub": 0o755,
    "hub/jupyterhub.log": 0o644,
    "hub/jupyterhub_config.py": 0o644,
    "homes": 0o755,
    "nbgrader": 0o755,
    # the course directory's own modes: coursehub.grading.perms (secure_course), left alone here
    "nbgrader/courses/mlmeca-2025/gradebook.db": 0o644,
    "nbgrader/courses/mlmeca-2025/nbgrader_config.py": 0o644,
}
PRIVATE_MODES = {
    ".": 0o700,
    "catalog.sqlite": 0o600,
    "catalog.sqlite-wal": 0o600,
    "catalog.sqlite-shm": 0o600,
    "jupyterhub.sqlite": 0o600,
    "jupyterhub_cookie_secret": 0o600,
    "demo-secrets.json": 0o600,
    "hub": 0o700,
    "hub/jupyterhub.log": 0o600,
    "hub/jupyterhub_config.py": 0o600,
    "homes": 0o700,
    "nbgrader": 0o700,
}


def test_the_mode_plan_fixes_only_what_differs_and_what_is_listed():
    fixes = dict(plan_mode_fixes(OLD_VERSION_MODES))
    assert fixes == {p: m for p, m in PRIVATE_MODES.items() if OLD_VERSION_MODES[p] != m}
    assert plan_mode_fixes(PRIVATE_MODES) == []


def test_no_private_mode_lets_group_or_others_in():
    assert all(mode & 0o077 == 0 for mode in DATA_MODES.values())


def test_a_data_dir_of_an_older_version_is_made_private(tmp_path):
    data = tmp_path / "data"
    for rel, mode in sorted(OLD_VERSION_MODES.items()):
        path = data / rel
        if rel in (".", "hub", "homes", "nbgrader"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
        os.chmod(path, mode)
    ensure_private_data(data)
    found = {rel: stat.S_IMODE((data / rel).stat().st_mode) for rel in OLD_VERSION_MODES}
    assert found == {**OLD_VERSION_MODES, **PRIVATE_MODES}


def test_a_symlink_in_the_data_dir_is_not_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    outside.chmod(0o644)
    data = tmp_path / "data"
    data.mkdir()
    (data / "catalog.sqlite").symlink_to(outside)
    ensure_private_data(data)
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644


# --- real demos ---------------------------------------------------------------------------


def _demo_class():
    from test_demo import Demo, _proxy_or_skip

    _proxy_or_skip()
    return Demo


def run_demo_command(data_dir: Path, port: int) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "coursehub",
        "demo",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.integration
def test_a_second_demo_is_refused_and_the_first_keeps_running(tmp_path):
    data = tmp_path / "data"
    first = _demo_class()(data)
    try:
        watched = [data / "proxy.pid", data / "hub" / "jupyterhub_config.py", data / "demo.lock"]
        before = {path: path.read_bytes() for path in watched}
        # the long-lived ones: the proxy and the hub (a formgrader or a usage read may come
        # and go meanwhile, as they do in a running demo)
        proxy = proxy_of_pid_file(data / "proxy.pid")
        hubs = [p for p in first.descendants() if "-m jupyterhub " in " ".join(cmdline_of(p)) + " "]
        assert proxy and hubs
        # same data dir, same or other port: refused at once, nothing touched
        for port in (first.port, free_port()):
            second = run_demo_command(data, port)
            assert second.returncode == 2, second.stdout + second.stderr
            assert second.stderr.strip() == (
                f"coursehub: error: a coursehub demo is already running on {data} "
                f"(pid {first.process.pid}, port {first.port}); stop it first"
            )
            assert "running" not in second.stdout and "catalog" not in second.stdout
        assert {path: path.read_bytes() for path in watched} == before
        assert all(p.is_running() for p in [*proxy, *hubs])
        assert first.api("GET", "/").status_code == 200
        # another data dir on the first one's port: the port is named at once
        other = run_demo_command(tmp_path / "other", first.port)
        assert other.returncode == 2
        assert f"127.0.0.1:{first.port} is already in use" in other.stderr
        assert "Traceback" not in other.stderr and "running" not in other.stdout
        assert not (tmp_path / "other" / "hub").exists()  # no hub was started
        # the data files of the running demo are private
        found = {rel: mode_of(data / rel) for rel in PRIVATE_MODES if (data / rel).exists()}
        assert found == {rel: PRIVATE_MODES[rel] for rel in found}
        assert set(found) >= {
            ".",
            "catalog.sqlite",
            "jupyterhub.sqlite",
            "hub/jupyterhub.log",
            "jupyterhub_cookie_secret",
            "demo-secrets.json",
        }
        gradebook = data / "nbgrader/courses/mlmeca-2025/gradebook.db"
        assert mode_of(gradebook) in (0o600, 0o660)  # the course's group: its formgrader
        assert mode_of(data / "nbgrader") == 0o700
    finally:
        assert first.stop() == 0
    assert not first.leftovers()


def cmdline_of(process: psutil.Process) -> list[str]:
    """Return ``process``'s command line, [] once it has ended."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def wait_gone(processes: list[psutil.Process], timeout_s: float = 60.0) -> list[psutil.Process]:
    """Return those of ``processes`` still running (not zombies) after at most ``timeout_s``."""
    with contextlib.suppress(WaitTimeoutError):
        wait_until(lambda: not still_running(processes), timeout_s, 0.5, what="processes to exit")
    return still_running(processes)


def command_of(process: psutil.Process) -> str:
    """Return the command line of ``process``, "" once it has ended (zombie or gone)."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Return those of ``processes`` that run and are not zombies."""
    left = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except psutil.NoSuchProcess:
            pass
    return left


@pytest.mark.integration
@pytest.mark.parametrize("killed", ["hub", "demo"])
def test_a_killed_demo_or_hub_leaves_no_process_and_frees_the_port(tmp_path, killed):
    from test_demo import STUDENT, wait_for_server

    data = tmp_path / "data"
    demo = _demo_class()(data)
    try:
        server = wait_for_server(demo, STUDENT)
        started = demo.descendants()
        # short-lived descendants (the demo book's first build) may end meanwhile
        names = " ".join(command_of(p) for p in started)
        for part in (
            "configurable-http-proxy",
            "coursehub web serve",
            "idle_culler",
            "/formgrader",
        ):
            assert part in names
        assert server in started
        hub = next(p for p in started if "jupyterhub -f" in command_of(p))
        (hub if killed == "hub" else psutil.Process(demo.process.pid)).kill()
        status = demo.process.wait(120)
        left = wait_gone(started)
    finally:
        demo.stop()
    assert not left, [command_of(p) for p in left]
    assert bind_problem("127.0.0.1", demo.port) is None
    if killed == "hub":
        assert status == 1
        assert "the hub exited unexpectedly (killed by SIGKILL)" in demo.text()
        assert not (data / "proxy.pid").exists()  # no stale pid for the next hub to kill
    # the data dir is free for the next demo
    acquire_lock(data, demo.port).release()
