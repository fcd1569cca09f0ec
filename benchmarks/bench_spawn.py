"""Spawn storm: 30 student servers requested at once on the demo hub.

Starts the ``coursehub demo`` hub (configurable-http-proxy, the local cgroup
spawner, ``concurrent_spawn_limit`` as rendered for the demo) in a temporary
data directory, requests every student's server of "Machine Learning for
Mechanics" at once through the REST API, and reports the time until each
server is ready (time to the last one is the figure that matters at class
start). Timings depend on the machine and on whatever else runs on it.

Usage: python benchmarks/bench_spawn.py [--students 30] [--timeout 600]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from coursehub.demo.hub import DemoHub, free_port, prepare_catalog


def request_server(api: str, token: str, username: str) -> int:
    """POST the user's server; return the HTTP status (201 started, 202 pending)."""
    headers = {"Authorization": f"token {token}"}
    return requests.post(f"{api}/users/{username}/server", headers=headers, timeout=120).status_code


def wait_ready(api: str, token: str, usernames: list[str], t0: float, timeout_s: float) -> dict:
    """Poll the users until every server is ready; return username -> seconds since ``t0``."""
    headers = {"Authorization": f"token {token}"}
    ready: dict[str, float] = {}
    while len(ready) < len(usernames) and time.monotonic() - t0 < timeout_s:
        for user in requests.get(f"{api}/users", headers=headers, timeout=30).json():
            new = user["name"] in usernames and user["name"] not in ready
            if new and user["servers"].get("", {}).get("ready"):
                ready[user["name"]] = time.monotonic() - t0
        time.sleep(0.5)
    return ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coursehub-bench-spawn-") as tmp:
        data_dir = Path(tmp)
        database_url, _ = prepare_catalog(data_dir)
        hub = DemoHub(data_dir, free_port(), "127.0.0.1")
        hub.start(database_url)
        try:
            hub.sync(database_url)
            api, token = f"{hub.url}/hub/api", hub.secrets.service_token
            usernames = [f"p25010{i:02d}" for i in range(1, args.students + 1)]
            t0 = time.monotonic()
            with ThreadPoolExecutor(max_workers=len(usernames)) as pool:
                statuses = list(pool.map(lambda u: request_server(api, token, u), usernames))
            ready = wait_ready(api, token, usernames, t0, args.timeout)
        finally:
            hub.stop()
    times = sorted(ready.values())
    print(f"servers requested: {len(usernames)} (HTTP statuses: {sorted(set(statuses))})")
    print(f"servers ready:     {len(times)} of {len(usernames)}")
    if times:
        print(f"first ready:       {times[0]:.1f} s")
        print(f"median ready:      {statistics.median(times):.1f} s")
        print(f"last ready:        {times[-1]:.1f} s  (time to the last server)")


if __name__ == "__main__":
    main()
