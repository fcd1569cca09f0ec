"""Hub-managed services end with their hub, even a hub killed with SIGKILL.

The report: after ``kill -9`` of a hub run from the rendered local
configuration, its course app and idle culler lived on; the next hub's course
app could not bind ("Address already in use") and two cullers ran. The
rendered configuration starts its services through
:func:`coursehub.spawn.hubservice.ends_with_hub`; here a real JupyterHub
starts two such services (a port-holding service and the idle culler), is
killed with SIGKILL, and starts again on the same ports.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest
import requests

from coursehub.spawn.hubservice import ends_with_hub, main
from helpers import free_port, wait_until
from hubfixture import RunningHub, find_proxy

CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]


def _extra(port: int) -> str:
    return f"""
import sys
from coursehub.spawn.hubservice import ends_with_hub
c.JupyterHub.services += [
    {{"name": "portholder", "url": "http://127.0.0.1:{port}",
      "command": ends_with_hub(
          [sys.executable, "-m", "http.server", "{port}", "--bind", "127.0.0.1"])}},
    {{"name": "idle-culler",
      "command": ends_with_hub(
          [sys.executable, "-m", "jupyterhub_idle_culler", "--timeout=3600"])}},
]
c.JupyterHub.load_roles.append(
    {{"name": "idle-culler", "scopes": {CULLER_SCOPES!r}, "services": ["idle-culler"]}}
)
"""


@pytest.fixture
def services_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningHub, int]]:
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    pytest.importorskip("jupyterhub_idle_culler")
    port = free_port()
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(
        tmp_path_factory.mktemp("serviceshub"), proxy, ports, extra_config=_extra(port)
    )
    hub.start()
    try:
        yield hub, port
    finally:
        hub.stop()


def _services(hub_pid: int) -> dict[str, psutil.Process]:
    """The hub's service processes, by the module they run (http.server, the culler)."""
    found: dict[str, psutil.Process] = {}
    for child in psutil.Process(hub_pid).children():
        cmdline = " ".join(child.cmdline())
        for module in ("http.server", "jupyterhub_idle_culler"):
            if f"-m {module}" in cmdline:
                found[module] = child
    return found


def _cullers(hub_port: int) -> list[psutil.Process]:
    """Every idle culler on this machine that talks to the hub listening on ``hub_port``.

    Other tests' hubs (other workers) run cullers of their own: those are left out
    by the hub API URL in the culler's environment (JupyterHub sets it for services).
    """
    port = f":{hub_port}/"
    cullers = []
    for process in psutil.process_iter(["cmdline"]):
        if "-m jupyterhub_idle_culler --timeout=3600" not in " ".join(
            process.info["cmdline"] or []
        ):
            continue
        with contextlib.suppress(psutil.Error):
            if port in process.environ().get("JUPYTERHUB_API_URL", ""):
                cullers.append(process)
    return cullers


@pytest.mark.integration
def test_services_end_with_a_hub_killed_with_sigkill(services_hub: tuple[RunningHub, int]) -> None:
    hub, port = services_hub
    assert hub.process is not None
    wait_until(lambda: len(_services(hub.process.pid)) == 2, timeout_s=60, what="both services")
    old = _services(hub.process.pid)
    wait_until(
        lambda: requests.get(f"http://127.0.0.1:{port}/", timeout=5).ok,
        timeout_s=30,
        what="the port-holding service",
    )

    hub.process.send_signal(signal.SIGKILL)
    hub.process.wait()
    _gone, alive = psutil.wait_procs(list(old.values()), timeout=15)
    for orphan in alive:  # the test leaves no orphan behind when it fails
        orphan.kill()
    assert not alive, f"services outlived their hub: {[p.pid for p in alive]}"

    hub.start()  # same ports: the service binds again
    wait_until(lambda: len(_services(hub.process.pid)) == 2, timeout_s=60, what="both services")
    new = _services(hub.process.pid)
    assert new["http.server"].is_running() and new["http.server"].pid != old["http.server"].pid
    assert [p.pid for p in _cullers(hub.ports["hub"])] == [new["jupyterhub_idle_culler"].pid]
    assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).ok


def test_a_service_whose_hub_is_already_gone_does_not_start() -> None:
    # pid 1 is never the parent of this test's subprocess
    done = subprocess.run(
        ends_with_hub([sys.executable, "-c", "print('started')"], hub_pid=1),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "started" not in done.stdout
    assert "its hub (pid 1) is gone, not starting" in done.stderr


def test_the_service_runs_when_its_parent_is_the_hub() -> None:
    script = (
        "import os, subprocess, sys; from coursehub.spawn.hubservice import ends_with_hub; "
        "sys.exit(subprocess.run(ends_with_hub([sys.executable, '-c', 'print(42)'])).returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "42"), done.stderr


@pytest.mark.parametrize("argv", [[], ["12", "true"], ["x", "--", "true"], ["12", "--"]])
def test_a_malformed_command_line_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert "usage: python -m coursehub.spawn.hubservice" in capsys.readouterr().err
