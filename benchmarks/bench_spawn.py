"""Spawn storm: 30 student servers requested at once on the demo hub.

Starts the ``coursehub demo`` hub (configurable-http-proxy, the local cgroup
spawner, ``concurrent_spawn_limit`` from this machine's CPUs as the demo sets
it, or ``--spawn-limit``) in a temporary data directory, then requests every
student's server of "Machine Learning for Mechanics" at once through the REST
API, as a class pressing "Start" together. A request the hub refuses with
HTTP 429 (more spawns pending than the limit) is retried after the
``Retry-After`` seconds the hub suggests, as the spawn page asks students to
do. The hub is polled until every server is ready or has failed; then every
server is stopped, the hub too, and no process of the run may be left.

Prints the servers requested, the limit, the 429 answers, the time (from the
first request) to the first and last ready server and the median, the
failures and the load average. Exit status 1 when a server failed or did not
come up in time. Starting a server costs about 1-2 s of CPU, so 30 servers
need 30-60 s of CPU; timings depend on whatever else runs on the machine.

Usage: python benchmarks/bench_spawn.py [--students 30] [--spawn-limit N]
                                        [--timeout 900] [--log FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import requests

from coursehub.demo.examhub import hub_processes, leftovers
from coursehub.demo.hub import DemoHub
from coursehub.demo.ports import free_port
from coursehub.demo.setup import prepare_catalog

#: Backoff when a 429 carries no Retry-After (seconds, doubled up to the cap).
BACKOFF_S, BACKOFF_CAP_S = 2.0, 30.0
POLL_S = 1.0
#: Hub log lines worth showing when a server failed.
LOG_MARKERS = ("never showed up", "giving up", "Unhandled error", "Failed", "[E ")


@dataclass
class Storm:
    """Shared state of one storm: what the request threads and the poller saw."""

    t0: float
    deadline: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    accepted: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    n_429: int = 0
    ready: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    max_load: float = 0.0


def retry_after_s(header: str, attempt: int) -> float:
    """Seconds to wait after a 429: the hub's ``Retry-After``, else capped doubling."""
    try:
        return max(0.0, float(header))
    except ValueError:
        return min(BACKOFF_CAP_S, BACKOFF_S * 2**attempt) * random.uniform(0.5, 1.0)


def request_server(session: requests.Session, api: str, username: str, storm: Storm) -> None:
    """POST the user's server until the hub accepts it (201/202), honouring 429 Retry-After."""
    attempt, outcome = 0, "no answer"
    while time.monotonic() < storm.deadline:
        try:
            response = session.post(f"{api}/users/{username}/server", timeout=120)
        except requests.RequestException as exc:
            outcome, wait_s = f"request error: {exc}", retry_after_s("", attempt)
        else:
            if response.status_code in (201, 202):
                with storm.lock:
                    storm.accepted.add(username)
                return
            if response.status_code != 429:
                with storm.lock:
                    storm.refused[username] = f"HTTP {response.status_code}: {response.text[:200]}"
                return
            outcome = "HTTP 429"
            wait_s = retry_after_s(response.headers.get("Retry-After", ""), attempt)
            with storm.lock:
                storm.n_429 += 1
        attempt += 1
        time.sleep(min(wait_s, max(0.0, storm.deadline - time.monotonic())))
    with storm.lock:
        storm.refused[username] = f"not accepted before the timeout (last: {outcome})"


def poll_servers(session: requests.Session, api: str, usernames: list[str], storm: Storm) -> None:
    """Record each accepted server as ready (seconds since ``t0``) or failed (gone, not ready)."""
    for user in session.get(f"{api}/users", timeout=60).json():
        name, server = user["name"], user["servers"].get("")
        with storm.lock:
            if name not in storm.accepted or name in storm.ready or name in storm.failed:
                continue
            if server is None:
                storm.failed[name] = "the server stopped before it was ready"
            elif server.get("ready"):
                storm.ready[name] = time.monotonic() - storm.t0
    storm.max_load = max(storm.max_load, os.getloadavg()[0])


def run_storm(api: str, token: str, usernames: list[str], timeout_s: float) -> Storm:
    """Request every server at once, then poll until each is ready, failed or refused."""
    t0 = time.monotonic()
    storm = Storm(t0=t0, deadline=t0 + timeout_s)
    session = requests.Session()
    session.headers["Authorization"] = f"token {token}"
    adapter = requests.adapters.HTTPAdapter(pool_maxsize=len(usernames) + 2)
    session.mount("http://", adapter)
    with ThreadPoolExecutor(max_workers=len(usernames)) as pool:
        for username in usernames:
            pool.submit(request_server, session, api, username, storm)
        while time.monotonic() < storm.deadline:
            time.sleep(POLL_S)
            poll_servers(session, api, usernames, storm)
            with storm.lock:
                if len(storm.ready) + len(storm.failed) + len(storm.refused) == len(usernames):
                    break
    return storm


def stop_servers(api: str, token: str, usernames: list[str], timeout_s: float = 300.0) -> int:
    """DELETE every server and wait until none is left; return how many are still there."""
    headers = {"Authorization": f"token {token}"}
    for username in usernames:
        requests.delete(f"{api}/users/{username}/server", headers=headers, timeout=120)
    deadline = time.monotonic() + timeout_s
    while True:
        users = requests.get(f"{api}/users", headers=headers, timeout=60).json()
        left = [u["name"] for u in users if u["name"] in usernames and u["servers"]]
        if not left or time.monotonic() > deadline:
            return len(left)
        time.sleep(POLL_S)


def failure_lines(log_path: Path, n_lines: int = 20) -> list[str]:
    """The last hub log lines that explain failed spawns."""
    lines = log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if any(m in line for m in LOG_MARKERS)][-n_lines:]


def print_report(storm: Storm, n_requested: int, spawn_limit: int, loads: list[float]) -> None:
    """Print the storm's figures."""
    times = sorted(storm.ready.values())
    print(f"servers requested:      {n_requested} (all at once)")
    print(f"concurrent_spawn_limit: {spawn_limit} ({os.cpu_count()} CPUs)")
    print(f"HTTP 429 answers:       {storm.n_429} (retried after Retry-After)")
    print(f"servers ready:          {len(times)} of {n_requested}")
    if times:
        print(f"first ready:            {times[0]:.1f} s")
        print(f"median (p50) ready:     {statistics.median(times):.1f} s")
        print(f"last ready:             {times[-1]:.1f} s  (time to the last server)")
    n_failed = n_requested - len(times)
    print(f"failures:               {n_failed}")
    for name, why in sorted({**storm.failed, **storm.refused}.items()):
        print(f"  {name}: {why}")
    print(
        f"load average (1 min):   before {loads[0]:.1f}, max during {storm.max_load:.1f}, "
        f"after {loads[1]:.1f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=30, help="servers (default 30, max 30)")
    parser.add_argument(
        "--spawn-limit",
        type=int,
        default=None,
        help="concurrent_spawn_limit (default: the demo's rule for this machine)",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds (default 900)")
    parser.add_argument("--log", type=Path, default=None, help="keep the hub log in FILE")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="coursehub-bench-spawn-") as tmp:
        data_dir = Path(tmp)
        database_url, _ = prepare_catalog(data_dir)
        hub = DemoHub(data_dir, free_port(), "127.0.0.1", spawn_limit=args.spawn_limit)
        hub.start(database_url)
        try:
            hub.sync(database_url)
            api, token = f"{hub.url}/hub/api", hub.secrets.service_token
            usernames = [f"p25010{i:02d}" for i in range(1, args.students + 1)]
            storm = run_storm(api, token, usernames, args.timeout)
            load_after = os.getloadavg()[0]
            n_left = stop_servers(api, token, usernames)
            processes = hub_processes(hub)
        finally:
            hub.stop()
        print_report(storm, len(usernames), hub.spawn_limit, [load_before, load_after])
        print(f"servers left after stop: {n_left}")
        left = leftovers(processes, data_dir)
        print(f"processes left after the hub stopped: {len(left)}")
        for line in left:
            print(f"  {line}")
        if storm.failed or storm.refused or len(storm.ready) < len(usernames):
            print("hub log (failures):", *failure_lines(hub.log_path), sep="\n  ")
        if args.log:
            shutil.copyfile(hub.log_path, args.log)
    return 0 if len(storm.ready) == len(usernames) and not left and not n_left else 1


if __name__ == "__main__":
    raise SystemExit(main())
