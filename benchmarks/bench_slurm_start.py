"""Where a Slurm server's start goes: sbatch, the queue, the launch, the server's imports, the hub.

One real hub with coursehub's ``DemoSlurmSpawner`` as
``benchmarks/bench_server_exit.py`` runs it, on a single-node cluster
started for the run (root, Slurm packages; ``tests/slurmfixture.py``).
Each repeat starts a fresh user's server and reads the time of each step
from the logs that write it (millisecond wall-clock times):

- ``submit``: the spawn request until slurmctld took the job
  ("_slurm_rpc_submit_batch_job: JobId=N", its log);
- ``queue``: until slurmctld allocated the job ("sched: Allocate JobId=N",
  its log);
- ``launch``: until slurmd launched the batch script ("Launching batch job
  N", its log);
- ``port``: until ``batchspawner-singleuser`` sent its port to the hub (the
  hub's log, ``POST /hub/api/batchspawner``): the batch script, its
  ``srun`` step, the interpreter and its imports;
- ``imports``: until Jupyter Server listened ("Jupyter Server ... is
  running at", the job's output file);
- ``hub sees it``: until the hub logged the server ready ("User ... took
  ... seconds to start").

Usage: ``.venv/bin/python benchmarks/bench_slurm_start.py [--repeats 3]
[--extra-config LINE]`` (``--extra-config`` may be given several times, e.g.
``'c.CoursehubSlurmSpawner.listen_poll_interval = 0'``). About 20 s a repeat.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_server_exit import _until, slurm_config
from helpers import free_port
from hubfixture import RunningHub, find_proxy
from slurmfixture import SlurmCluster, cluster_missing_reason, start_cluster, stop_cluster

#: JupyterHub's and Jupyter Server's log time: "[I 2026-12-04 23:24:51.393 JupyterHub ...".
TRAITLETS_TIME = re.compile(r"^\[\w (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})")
#: Slurm's (LogTimeFormat=iso8601_ms, the default): "[2026-12-04T23:24:51.393] ...".
SLURM_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\]")
STEPS = ("submit", "queue", "launch", "port", "imports", "hub sees it")


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace(" ", "T")).timestamp()


def first_time(path: Path, pattern: str, regex: re.Pattern[str], after: float) -> float:
    """Wall-clock time of the first line of ``path`` at or after ``after`` holding ``pattern``."""
    for line in path.read_text(errors="replace").splitlines():
        found = regex.match(line)
        if found and pattern in line and _stamp(found.group(1)) >= after - 0.001:
            return _stamp(found.group(1))
    raise LookupError(f"no line with {pattern!r} in {path}")


def sign_in(hub: RunningHub, user: str) -> requests.Session:
    """A session of ``user`` signed in, sent to the home page (which starts no server)."""
    session = requests.Session()
    session.get(f"{hub.url}/hub/login", timeout=30)
    session.post(
        f"{hub.url}/hub/login?next=%2Fhub%2Fhome",
        data={"username": user, "password": hub.password, "_xsrf": session.cookies.get("_xsrf")},
        timeout=60,
    )
    return session


def one_start(hub: RunningHub, cluster: SlurmCluster, homes: Path) -> dict[str, float]:
    """Start a fresh user's server; return the seconds of each step of :data:`STEPS`."""
    user = f"start{uuid.uuid4().hex[:8]}"
    session = sign_in(hub, user)
    admin = {"Authorization": f"token {hub.admin_token}"}
    api = f"{hub.api_url}/users/{user}"
    t0 = time.time()
    session.get(f"{hub.url}/hub/spawn/{user}", timeout=60)
    _until(lambda: requests.get(api, headers=admin, timeout=30).json()["servers"][""]["ready"])
    try:
        state = requests.get(api, headers=admin, timeout=30).json()["servers"][""]["state"]
        job_id = str(state["job_id"])
        log, ctld = hub.log_path, cluster.state_dir / "ctld/slurmctld.log"
        slurmd = cluster.state_dir / "ctld/slurmd.log"
        times = [
            first_time(ctld, f"_slurm_rpc_submit_batch_job: JobId={job_id} ", SLURM_TIME, t0),
            first_time(ctld, f"Allocate JobId={job_id} ", SLURM_TIME, t0),
            first_time(slurmd, f"Launching batch job {job_id} ", SLURM_TIME, t0),
            first_time(log, "POST /hub/api/batchspawner", TRAITLETS_TIME, t0),
            first_time(
                homes / user / f"jupyterhub_slurmspawner_{job_id}.log",
                "is running at",
                TRAITLETS_TIME,
                t0,
            ),
            first_time(log, f"User {user} took", TRAITLETS_TIME, t0),
        ]
    finally:
        requests.delete(f"{api}/server", headers=admin, timeout=60)
        _until(lambda: not requests.get(api, headers=admin, timeout=30).json()["servers"])
        requests.delete(api, headers=admin, timeout=60)
    marks = [t0, *times]
    return {step: marks[i + 1] - marks[i] for i, step in enumerate(STEPS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="starts (default 3)")
    parser.add_argument("--extra-config", action="append", default=[], metavar="LINE")
    args = parser.parse_args(argv)
    proxy, missing = find_proxy(), cluster_missing_reason()
    if proxy is None or missing:
        print(f"bench_slurm_start: {missing or 'configurable-http-proxy not found'}")
        return 2
    cluster, reason = start_cluster()
    if cluster is None:
        print(f"bench_slurm_start: {reason}")
        return 2
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ports = {key: free_port() for key in ("public", "hub", "proxy_api")}
            extra = slurm_config("slurm", Path(tmp)) + "".join(f"{x}\n" for x in args.extra_config)
            hub = RunningHub(Path(tmp), proxy, ports, extra_config=extra)
            hub.start()
            try:
                rows = [one_start(hub, cluster, Path(tmp) / "homes") for _ in range(args.repeats)]
            except LookupError:
                print("\n".join(hub.log_path.read_text().splitlines()[-60:]))
                raise
            finally:
                hub.stop()
    finally:
        stop_cluster(cluster)
    print("seconds per step: " + ", ".join(STEPS) + ", total")
    for row in rows:
        print("  ".join(f"{row[s]:6.2f}" for s in STEPS) + f"  {sum(row.values()):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
