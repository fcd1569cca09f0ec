"""Job cgroups: the plan (pure), systemd-run's command (pure), and the real thing as root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coursehub.resources.cgroups import (
    CgroupUnavailableError,
    JobCgroup,
    job_cgroup_bases,
    plan_job_cgroup,
    systemd_run_command,
)


def test_plan_v1_writes_quota_memory_and_swap():
    plan = plan_job_cgroup(1, Path("/cg/cpu"), Path("/cg/memory/own"), "j1", 2.0, 100 * 1024**2)
    assert plan.job_dirs == (Path("/cg/cpu/coursehub/j1"), Path("/cg/memory/own/coursehub/j1"))
    assert [(str(w.path), w.value, w.optional) for w in plan.writes] == [
        ("/cg/cpu/coursehub/j1/cpu.cfs_period_us", "100000", False),
        ("/cg/cpu/coursehub/j1/cpu.cfs_quota_us", "200000", False),
        ("/cg/memory/own/coursehub/j1/memory.limit_in_bytes", "104857600", False),
        ("/cg/memory/own/coursehub/j1/memory.memsw.limit_in_bytes", "104857600", True),
    ]


def test_plan_v2_enables_controllers_on_the_way():
    plan = plan_job_cgroup(2, Path("/cg"), Path("/cg"), "j2", 0.5, None, parent="p")
    assert plan.job_dirs == (Path("/cg/p/j2"),)
    assert [(str(w.path), w.value) for w in plan.writes] == [
        ("/cg/cgroup.subtree_control", "+cpu +memory"),
        ("/cg/p/cgroup.subtree_control", "+cpu +memory"),
        ("/cg/p/j2/cpu.max", "50000 100000"),
    ]
    with_mem = plan_job_cgroup(2, Path("/cg"), Path("/cg"), "j2", None, 4096)
    assert [(w.path.name, w.value, w.optional) for w in with_mem.writes[2:]] == [
        ("memory.max", "4096", False),
        ("memory.swap.max", "0", True),
    ]


@pytest.mark.parametrize("bad", ["", "a/b", ".."])
def test_plan_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="path component"):
        plan_job_cgroup(1, Path("/a"), Path("/b"), bad, 1.0, None)


def test_systemd_run_command():
    argv = [sys.executable, "-m", "coursehub.runner.bootstrap", "train.py"]
    assert systemd_run_command(argv, "coursehub-j.scope", 2.0, 2 * 1024**3) == [
        "systemd-run",
        "--scope",
        "--quiet",
        "--unit=coursehub-j.scope",
        "-p",
        "CPUQuota=200%",
        "-p",
        "MemoryMax=2147483648",
        "-p",
        "MemorySwapMax=0",
        "--",
        *argv,
    ]
    assert systemd_run_command(["x"], "u.scope", 0.5, None) == [
        "systemd-run",
        "--scope",
        "--quiet",
        "--unit=u.scope",
        "-p",
        "CPUQuota=50%",
        "--",
        "x",
    ]


def test_bases_on_a_fake_v1_tree_nest_under_own_cgroup(tmp_path):
    root, proc = tmp_path / "cg", tmp_path / "proc"
    (root / "cpu").mkdir(parents=True)
    (root / "memory" / "sess" / "42").mkdir(parents=True)
    proc.write_text("4:memory:/sess/42\n1:cpu:/\n0::/\n")
    assert job_cgroup_bases(root, proc) == (1, root / "cpu", root / "memory" / "sess" / "42")


def test_bases_unavailable_without_controllers(tmp_path):
    (tmp_path / "proc").write_text("0::/\n")
    with pytest.raises(CgroupUnavailableError):
        job_cgroup_bases(tmp_path / "cg", tmp_path / "proc")


@pytest.mark.root
def test_job_cgroup_limits_stats_and_removal(cgroup_parent):
    job = JobCgroup.create("limits-probe", 1.5, 64 * 1024**2, parent=cgroup_parent)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        job.add_pid(child.pid)
        assert child.pid in job.pids()
        if job.plan.version == 1:
            assert job.read("cpu.cfs_quota_us") == "150000"
            assert job.read("memory.limit_in_bytes") == str(64 * 1024**2)
        else:
            assert job.read("cpu.max") == "150000 100000"
            assert job.read("memory.max") == str(64 * 1024**2)
        stats = job.stats()
        assert stats.oom_kills in (0, None) and stats.nr_throttled >= 0
    finally:
        job.remove()  # kills what is left inside
        child.wait(timeout=10)
    assert child.returncode == -9
    assert not any(d.exists() for d in job.plan.job_dirs)


@pytest.mark.root
def test_job_cgroup_counts_an_oom_kill(cgroup_parent):
    job = JobCgroup.create("oom-probe", None, 50 * 1024**2, parent=cgroup_parent)
    code = (
        "import os, sys\n"
        "for procs in sys.argv[1:]: open(procs, 'w').write(str(os.getpid()))\n"
        "x = bytearray(200 * 2**20)\n"
    )
    try:
        procs = [str(p) for p in job.procs_files]
        done = subprocess.run([sys.executable, "-c", code, *procs], check=False)
        assert done.returncode == -9
        stats = job.stats()
        assert (stats.oom_kills or 0) >= 1 or stats.mem_limit_hits >= 1
    finally:
        job.remove()


@pytest.mark.root
def test_create_refuses_an_existing_job_and_leaves_it_alone(cgroup_parent):
    first = JobCgroup.create("twin", 1.0, None, parent=cgroup_parent)
    try:
        with pytest.raises(CgroupUnavailableError, match="twin"):
            JobCgroup.create("twin", 1.0, None, parent=cgroup_parent)
        assert all(d.is_dir() for d in first.plan.job_dirs)
    finally:
        first.remove()
    assert not any(d.exists() for d in first.plan.job_dirs)
