"""The real-Slurm fixture ``slurm_cluster`` (tests marked ``slurm``).

One single-node cluster per test session, made by ``scripts/slurm-single-node``
in a temporary folder on free ports, and stopped (jobs cancelled, daemons
stopped, folder deleted) at the end. ``SLURM_CONF`` points at it for the
session. The fixture skips, with the reason, where the daemons cannot start:
not root, packages not installed, or the script's own error line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import free_port

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-single-node"


@dataclass(frozen=True)
class SlurmCluster:
    """A running single-node cluster: its configuration, partition, CPUs and memory."""

    state_dir: Path
    conf: Path
    partition: str
    cpus: int
    real_memory_mib: int


def _node_figures() -> tuple[int, int]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%c %m"], capture_output=True, text=True)
    cpus, mem = out.stdout.split()[:2]
    return int(cpus), int(mem)


def cluster_missing_reason() -> str:
    """Return why no single-node cluster can start here ("" if it can): root, packages."""
    if os.geteuid() != 0:
        return "a single-node Slurm needs root (slurmd runs as root)"
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch") if not shutil.which(b)]
    if missing:
        return (
            f"Slurm not installed ({', '.join(missing)} missing): "
            "apt-get install slurmctld slurmd slurm-client munge"
        )
    return ""


def start_cluster() -> tuple[SlurmCluster | None, str]:
    """Start a single-node cluster and set ``SLURM_CONF``; return it, or None and why not."""
    reason = cluster_missing_reason()
    if reason:
        return None, reason
    state = Path(tempfile.mkdtemp(prefix="coursehub-slurm-"))
    os.chmod(state, 0o755)  # jobs of other users read slurm.conf and the munge socket
    base = [sys.executable, str(SCRIPT), "--state-dir", str(state)]
    ports = ["--port", str(free_port()), "--slurmd-port", str(free_port())]
    started = subprocess.run([*base, *ports, "start"], capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        subprocess.run([*base, "stop", "--purge"], capture_output=True, timeout=60)
        return None, f"the Slurm daemons could not start: {started.stderr.strip()}"
    os.environ["SLURM_CONF"] = str(state / "slurm.conf")
    cpus, mem = _node_figures()
    return SlurmCluster(state, state / "slurm.conf", "debug", cpus, mem), ""


def stop_cluster(cluster: SlurmCluster) -> None:
    """Cancel its jobs, stop its daemons and delete its folder."""
    base = [sys.executable, str(SCRIPT), "--state-dir", str(cluster.state_dir)]
    subprocess.run([*base, "stop", "--purge"], capture_output=True, timeout=120)


def job_server_pids(job_id: str) -> list[int]:
    """Return the pids of a Slurm job's server (``scontrol listpids``; not srun or the script)."""
    out = subprocess.run(["scontrol", "listpids", job_id], capture_output=True, text=True)
    pids = []
    for line in out.stdout.splitlines()[1:]:
        first = (line.split() or ["-"])[0]
        if not first.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{first}/cmdline").read_bytes()
        except OSError:
            continue
        argv = cmdline.split(b"\0")
        launcher = os.path.basename(argv[0]) in (b"srun", b"slurmstepd", b"bash", b"sh")
        if not launcher and any(b"singleuser" in arg for arg in argv):
            pids.append(int(first))
    return pids


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A single-node Slurm cluster for the test session (skips with the reason if it can't run)."""
    previous = os.environ.get("SLURM_CONF")
    cluster, reason = start_cluster()
    if cluster is None:
        pytest.skip(reason)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
