"""scripts/slurm-single-node: the configuration it writes (pure) and the cluster it starts."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-single-node"
NODE = (
    "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
    "RealMemory=24105"
)


def load_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("slurm_single_node", str(SCRIPT))
    spec = importlib.util.spec_from_loader("slurm_single_node", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_with_cgroup_v1_jobs_are_tracked_and_confined_by_cgroups():
    conf = load_script().render_slurm_conf(Path("/s"), NODE, True, 6817, 6818, 0)
    assert "ProctrackType=proctrack/cgroup\n" in conf
    assert "TaskPlugin=task/cgroup,task/affinity\n" in conf
    assert "NodeName=vm NodeAddr=127.0.0.1 CPUs=2 " in conf
    assert "RealMemory=24105 State=UNKNOWN\n" in conf
    assert "DefMemPerCPU=12052\n" in conf  # a job without --mem does not take the whole node
    assert "AuthInfo=socket=/s/munge/munge.socket\n" in conf
    assert "GresTypes" not in conf


def test_without_usable_cgroups_memory_is_enforced_by_sampling():
    conf = load_script().render_slurm_conf(Path("/s"), NODE, False, 7000, 7001, 2)
    assert "ProctrackType=proctrack/linuxproc\n" in conf
    assert "JobAcctGatherParams=OverMemoryKill\n" in conf
    assert "task/cgroup" not in conf
    assert "GresTypes=gpu\n" in conf and " Gres=gpu:2 " in conf
    assert "SlurmctldPort=7000\nSlurmdPort=7001\n" in conf


@pytest.mark.slurm
def test_the_cluster_reports_its_daemons_and_an_idle_node(slurm_cluster):
    status = subprocess.run(
        [str(SCRIPT), "--state-dir", str(slurm_cluster.state_dir), "status"],
        capture_output=True,
        text=True,
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert "slurmctld: running" in status.stdout and "slurmd: running" in status.stdout
    again = subprocess.run(
        [str(SCRIPT), "--state-dir", str(slurm_cluster.state_dir), "start"],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0 and again.stdout.startswith("already running")
