"""How soon a student whose server was killed gets a working server again.

The report (jupyterhub/systemdspawner#87, #7): after ``kill -9`` of a
student's server, reloading answered "503 Service Unavailable" and Start led
back to the same 503 until the hub's periodic poll (``Spawner.poll_interval``,
30 s by default) noticed. Two real hubs run side by side on this machine,
each with JupyterHub's default poll interval:

- ``jupyterhub``: JupyterHub's ``SimpleLocalProcessSpawner`` (the periodic poll only);
- ``coursehub``: ``coursehub.spawn.cgroupspawner.CgroupSimpleLocalProcessSpawner``,
  whose pidfd watch (:mod:`coursehub.spawn.serverexit`) notices the exit at once.

For each repeat, interleaved between the two hubs: start a student's server,
wait until it is ready, ``kill -9`` it, then time (a) until a reload of
``/user/<name>/lab`` answers JupyterHub's "Server not running" page (424)
instead of the 503, and (b) until Start gives a ready server again. Prints
the median and its interval (:func:`coursehub.bench.stats.describe_median`)
per hub and step.

Usage: ``.venv/bin/python benchmarks/bench_server_exit.py [--repeats 5]``
(needs configurable-http-proxy: ``make setup``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from coursehub.bench.stats import describe_median
from helpers import free_port
from hubfixture import RunningHub, find_proxy

CONFIGS = {
    "jupyterhub": 'c.JupyterHub.spawner_class = "simple"\n',
    "coursehub": (
        "from coursehub.spawn.hubpages import template_dir\n"
        "from coursehub.spawn.serverexit import server_stop_notices\n"
        'c.JupyterHub.spawner_class = "coursehub.spawn.cgroupspawner.'
        'CgroupSimpleLocalProcessSpawner"\n'
        "c.CgroupSimpleLocalProcessSpawner.home_dir_template = "
        "c.SimpleLocalProcessSpawner.home_dir_template\n"
        "c.JupyterHub.template_paths = [template_dir()]\n"
        'c.JupyterHub.template_vars = {"server_stop_notices": server_stop_notices}\n'
    ),
}
#: Seconds to wait for any one step before the repeat counts as failed.
STEP_TIMEOUT_S = 120.0


def _until(predicate, timeout_s: float = STEP_TIMEOUT_S) -> float:  # type: ignore[no-untyped-def]
    """Seconds until ``predicate()`` is true (polled every 0.2 s); raise TimeoutError after."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"not within {timeout_s:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - start


def _server(hub: RunningHub, user: str) -> dict[str, object]:
    model = requests.get(
        f"{hub.api_url}/users/{user}",
        headers={"Authorization": f"token {hub.admin_token}"},
        timeout=30,
    ).json()
    server: dict[str, object] = model.get("servers", {}).get("", {})
    return server


def _ready(hub: RunningHub, user: str) -> bool:
    return bool(_server(hub, user).get("ready"))


def one_kill(hub: RunningHub) -> tuple[float, float]:
    """Kill a fresh server; return (seconds until the reload says stopped, until ready again)."""
    user = f"kill{uuid.uuid4().hex[:8]}"
    session = requests.Session()
    session.get(f"{hub.url}/hub/login", timeout=30)
    session.post(
        f"{hub.url}/hub/login",
        data={"username": user, "password": hub.password, "_xsrf": session.cookies.get("_xsrf")},
        timeout=60,
    )
    admin = {"Authorization": f"token {hub.admin_token}"}
    try:
        session.get(f"{hub.url}/hub/spawn/{user}", timeout=60)
        _until(lambda: _ready(hub, user))
        state = _server(hub, user).get("state") or {}
        os.kill(int(state["pid"]), signal.SIGKILL)  # type: ignore[index]
        lab = f"{hub.url}/user/{user}/lab"
        noticed = _until(lambda: session.get(lab, timeout=30).status_code == 424)
        start = time.monotonic()
        session.get(f"{hub.url}/hub/spawn/{user}", timeout=60)
        _until(lambda: _ready(hub, user))
        return noticed, noticed + time.monotonic() - start
    finally:
        requests.delete(f"{hub.api_url}/users/{user}/server", headers=admin, timeout=60)
        _until(lambda: not _server(hub, user))
        requests.delete(f"{hub.api_url}/users/{user}", headers=admin, timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="kills per hub (default 5)")
    args = parser.parse_args(argv)
    proxy = find_proxy()
    if proxy is None:
        print("bench_server_exit: configurable-http-proxy not found (make setup)", file=sys.stderr)
        return 2
    times: dict[str, dict[str, list[float]]] = {
        name: {"noticed": [], "working": []} for name in CONFIGS
    }
    with tempfile.TemporaryDirectory() as tmp:
        hubs = {}
        for name, extra in CONFIGS.items():
            ports = {key: free_port() for key in ("public", "hub", "proxy_api")}
            hubs[name] = RunningHub(Path(tmp) / name, proxy, ports, extra_config=extra)
            (Path(tmp) / name).mkdir()
            hubs[name].start()
        try:
            for repeat in range(args.repeats):
                for name, hub in hubs.items():  # interleaved
                    noticed, working = one_kill(hub)
                    times[name]["noticed"].append(noticed)
                    times[name]["working"].append(working)
                    print(
                        f"repeat {repeat + 1}/{args.repeats} {name}: reload says stopped "
                        f"after {noticed:.1f} s, working server after {working:.1f} s",
                        flush=True,
                    )
        finally:
            for hub in hubs.values():
                hub.stop()
    print(f"\nkill -9 of a student's server, {args.repeats} repeats per hub, poll_interval 30 s")
    for name in CONFIGS:
        for step, label in (("noticed", "reload says stopped"), ("working", "working again")):
            print(describe_median(f"{name:>10}  {label:<20}", times[name][step], " s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
