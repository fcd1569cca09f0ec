"""How soon a student whose server was killed gets a working server again, per spawner.

The report (jupyterhub/systemdspawner#87, #7): after ``kill -9`` of a
student's server, reloading answered "503 Service Unavailable" and Start led
back to the same 503 until the hub's periodic poll (``Spawner.poll_interval``,
30 s by default) noticed. One real hub per spawner this machine can run
(:func:`coursehub.bench.serverexit.plan_exit_variants`; the others are printed
as "skipped: <reason>"):

- ``jupyterhub``: JupyterHub's ``SimpleLocalProcessSpawner`` (the periodic poll only, 30 s);
- ``cgroup``: ``CgroupSimpleLocalProcessSpawner`` as root (real cgroups), whose pidfd
  watch (:mod:`coursehub.spawn.serverexit`) notices the exit at once (poll 30 s);
- ``slurm``: ``DemoSlurmSpawner`` (coursehub's SlurmSpawner) as rendered: its job watch
  (:mod:`coursehub.spawn.slurmwatch`, one ``squeue`` for all servers every 2 s) notices
  the ended job, the periodic poll every 8 s is the fallback; the cluster of
  ``$SLURM_CONF`` when ``scontrol ping`` answers, else a single-node cluster started
  for the run (root, Slurm packages; ``tests/slurmfixture.py``);
- ``systemd``: not run (it needs one Unix account per student); the reason is printed.

For each repeat, interleaved between the hubs: start a student's server,
wait until it is ready, ``kill -9`` it (for Slurm: the server process in the
job, ``scontrol listpids``), then time (a) until a reload of
``/user/<name>/lab`` answers JupyterHub's "Server not running" page (424)
instead of the 503, and (b) until Start gives a ready server again (and
that start alone, which the machine's load sets). Prints
per spawner the medians and their intervals
(:func:`coursehub.bench.serverexit.summarise_exit_times`) and how many runs
had a working server within 10 s.

Usage: ``.venv/bin/python benchmarks/bench_server_exit.py [--repeats 3]
[--spawners jupyterhub,cgroup,slurm]`` (needs configurable-http-proxy: ``make setup``;
about 3 minutes with the defaults, most of it the plain hub's 30 s poll).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from coursehub.bench.serverexit import VARIANT_NAMES, plan_exit_variants, summarise_exit_times
from coursehub.hub.render import POLL_INTERVAL_S
from helpers import free_port
from hubfixture import RunningHub, find_proxy
from slurmfixture import (
    SlurmCluster,
    cluster_missing_reason,
    job_server_pids,
    start_cluster,
    stop_cluster,
)

PAGES = (
    "from coursehub.spawn.hubpages import template_dir\n"
    "from coursehub.spawn.serverexit import server_stop_notices\n"
    "c.JupyterHub.template_paths = [template_dir()]\n"
    'c.JupyterHub.template_vars = {"server_stop_notices": server_stop_notices}\n'
)
#: Seconds to wait for any one step before the repeat counts as failed.
STEP_TIMEOUT_S = 120.0


def local_config(name: str, tmp: Path) -> str:
    """The hub's extra configuration for the local variants."""
    if name == "jupyterhub":
        return 'c.JupyterHub.spawner_class = "simple"\n'
    return PAGES + (
        'c.JupyterHub.spawner_class = "coursehub.spawn.cgroupspawner.'
        'CgroupSimpleLocalProcessSpawner"\n'
        "c.CgroupSimpleLocalProcessSpawner.home_dir_template = "
        "c.SimpleLocalProcessSpawner.home_dir_template\n"
    )


def slurm_config(name: str, tmp: Path) -> str:
    """The hub's extra configuration for Slurm: coursehub's spawner as rendered, homes in tmp."""
    partition = subprocess.run(
        ["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    singleuser = str(Path(sys.executable).parent / "batchspawner-singleuser")
    return PAGES + (
        "import batchspawner  # noqa: F401\n"
        'c.JupyterHub.spawner_class = "coursehub.spawn.slurmspawner.DemoSlurmSpawner"\n'
        f"c.DemoSlurmSpawner.home_dir_template = {str(tmp / 'homes' / '{username}')!r}\n"
        f'c.Spawner.environment = {{"SLURM_CONF": {os.environ["SLURM_CONF"]!r}}}\n'
        f"c.SlurmSpawner.req_partition = {partition.rstrip('*')!r}\n"
        'c.SlurmSpawner.req_nprocs = "1"\n'
        'c.SlurmSpawner.req_memory = "1024M"\n'
        'c.SlurmSpawner.req_runtime = "0:10:00"\n'
        f"c.SlurmSpawner.batchspawner_singleuser_cmd = {singleuser!r}\n"
        f"c.SlurmSpawner.poll_interval = {POLL_INTERVAL_S}\n"
    )


def slurm_state() -> tuple[str, SlurmCluster | None]:
    """Return why Slurm cannot be used ("" if it can) and a cluster started here (to stop)."""
    if os.environ.get("SLURM_CONF"):
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        if "UP" in ping.stdout:
            return "", None
    reason = cluster_missing_reason()
    if reason:
        return reason, None
    cluster, reason = start_cluster()
    return reason, cluster


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


def kill_server(hub: RunningHub, user: str) -> None:
    """``kill -9`` the server's process (a local pid, or the one in its Slurm job)."""
    state: dict[str, object] = _server(hub, user).get("state") or {}  # type: ignore[assignment]
    pids = [int(state["pid"])] if state.get("pid") else job_server_pids(str(state["job_id"]))
    if not pids:
        raise RuntimeError(f"no server process found for {user}: {state}")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def _signed_in(hub: RunningHub, user: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{hub.url}/hub/login", timeout=30)
    session.post(
        f"{hub.url}/hub/login",
        data={"username": user, "password": hub.password, "_xsrf": session.cookies.get("_xsrf")},
        timeout=60,
    )
    return session


def one_kill(hub: RunningHub) -> tuple[float, float, float]:
    """Kill a fresh server; return seconds until the reload says stopped, until ready again
    (both from the kill), and from Start to ready."""
    user = f"kill{uuid.uuid4().hex[:8]}"
    session = _signed_in(hub, user)
    admin = {"Authorization": f"token {hub.admin_token}"}
    try:
        session.get(f"{hub.url}/hub/spawn/{user}", timeout=60)
        _until(lambda: _ready(hub, user))
        kill_server(hub, user)
        start = time.monotonic()
        lab = f"{hub.url}/user/{user}/lab"
        noticed = _until(lambda: session.get(lab, timeout=30).status_code == 424)
        session.get(f"{hub.url}/hub/spawn/{user}", timeout=60)
        spawn = _until(lambda: _ready(hub, user))
        return noticed, time.monotonic() - start, spawn
    finally:
        requests.delete(f"{hub.api_url}/users/{user}/server", headers=admin, timeout=60)
        _until(lambda: not _server(hub, user))
        requests.delete(f"{hub.api_url}/users/{user}", headers=admin, timeout=60)


def start_hubs(names: list[str], tmp: Path, proxy: str) -> dict[str, RunningHub]:
    """Start one hub per variant, each in its own folder under ``tmp``."""
    hubs = {}
    for name in names:
        ports = {key: free_port() for key in ("public", "hub", "proxy_api")}
        config = slurm_config if name == "slurm" else local_config
        (tmp / name).mkdir()
        hubs[name] = RunningHub(tmp / name, proxy, ports, extra_config=config(name, tmp / name))
        hubs[name].start()
    return hubs


def run_kills(hubs: dict[str, RunningHub], repeats: int) -> dict[str, tuple[list, list, list]]:
    """Kill ``repeats`` servers per hub, interleaved; return the times per hub."""
    times: dict[str, tuple[list, list, list]] = {name: ([], [], []) for name in hubs}
    for repeat in range(repeats):
        for name, hub in hubs.items():
            try:
                noticed, working, spawn = one_kill(hub)
            except (TimeoutError, RuntimeError) as exc:
                print(f"repeat {repeat + 1}/{repeats} {name}: failed: {exc}", flush=True)
                continue
            times[name][0].append(noticed)
            times[name][1].append(working)
            times[name][2].append(spawn)
            print(
                f"repeat {repeat + 1}/{repeats} {name}: reload says stopped after "
                f"{noticed:.1f} s, working server after {working:.1f} s (start {spawn:.1f} s)",
                flush=True,
            )
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="kills per spawner (default 3)")
    parser.add_argument(
        "--spawners", default=",".join(VARIANT_NAMES), help="comma-separated (default: all)"
    )
    args = parser.parse_args(argv)
    proxy = find_proxy()
    if proxy is None:
        print("bench_server_exit: configurable-http-proxy not found (make setup)", file=sys.stderr)
        return 2
    wanted = [name for name in args.spawners.split(",") if name]
    slurm_missing, cluster = slurm_state() if "slurm" in wanted else ("not asked for", None)
    variants = plan_exit_variants(
        os.geteuid() == 0, Path("/run/systemd/system").is_dir(), slurm_missing, wanted
    )
    for variant in variants:
        if variant.skipped:
            print(f"{variant.name}: skipped: {variant.skipped}", flush=True)
    names = [variant.name for variant in variants if not variant.skipped]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            hubs = start_hubs(names, Path(tmp), proxy)
            try:
                times = run_kills(hubs, args.repeats)
            finally:
                for hub in hubs.values():
                    hub.stop()
    finally:
        if cluster is not None:
            stop_cluster(cluster)
    print(f"\nkill -9 of a student's server, {args.repeats} repeats per spawner")
    for name in names:
        print("\n".join(summarise_exit_times(name, *times[name])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
