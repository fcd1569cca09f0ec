"""Usage accounting against work of known cost: real cgroups, a real runner job, a real catalog."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from coursehub.catalog.models.usage import UsageUnit
from coursehub.catalog.usage.ingest import ingest_folder
from coursehub.meter.cgroupread import add_cpuacct
from coursehub.meter.hubhook import close_server_usage, open_server_usage
from coursehub.meter.journal import USAGE_DIR_VAR, list_journals, read_records
from coursehub.meter.sampler import COURSE_VAR, Sampler
from coursehub.resources.cgroups import JobCgroup
from coursehub.runner.api import submit
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from coursehub.usage.report import usage_report

pytestmark = pytest.mark.root

#: CPU-seconds the busy loop burns (measured by the child's own clock).
CPU_COST_S = 1.5
#: Bytes the allocation holds (every page written).
MEM_COST = 128 * 2**20

BUSY = textwrap.dedent(
    f"""
    import time
    start = time.process_time()
    while time.process_time() - start < {CPU_COST_S}:
        pass
    """
)
ALLOC = textwrap.dedent(
    f"""
    import sys
    print("ready", flush=True)
    sys.stdin.readline()
    data = b"\\x01" * {MEM_COST}
    print("held", flush=True)
    sys.stdin.readline()
    """
)


def _start_in(cgroup: JobCgroup, code: str, **kwargs: object) -> subprocess.Popen[str]:
    procs = [str(p) for p in cgroup.procs_files]

    def join() -> None:
        for path in procs:
            Path(path).write_text(str(os.getpid()))

    return subprocess.Popen([sys.executable, "-c", code], preexec_fn=join, text=True, **kwargs)


def _cgroup(name: str, parent: str, cpu_limit: float | None, mem_limit: int | None) -> JobCgroup:
    cgroup = JobCgroup.create(name, cpu_limit, mem_limit, parent=parent)
    return JobCgroup(add_cpuacct(cgroup.plan))


def test_a_busy_loop_under_a_quota_is_accounted_within_five_percent(tmp_path, cgroup_parent):
    cgroup = _cgroup("busy", cgroup_parent, cpu_limit=0.5, mem_limit=None)
    sampler = Sampler(tmp_path / "usage", "hub1")
    try:
        sampler.open(
            "server:hub1:ada::1",
            "server",
            "ada",
            "alpha",
            cgroup.plan.version,
            cgroup.plan.job_dirs,
        )
        proc = _start_in(cgroup, BUSY)
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0
        closed = sampler.close("server:hub1:ada::1", "stopped")
    finally:
        cgroup.remove()
    assert closed is not None
    known = rusage.ru_utime + rusage.ru_stime
    assert known >= CPU_COST_S
    # The child's own total (interpreter start-up included, which a loaded
    # machine makes dearer) is what the cgroup must have counted.
    assert closed.cpu_s == pytest.approx(known, rel=0.05)
    assert closed.cpu_s >= CPU_COST_S * 0.95


def test_an_allocation_of_known_size_raises_the_peak_by_that_size_within_five_percent(
    tmp_path, cgroup_parent
):
    cgroup = _cgroup("alloc", cgroup_parent, cpu_limit=None, mem_limit=4 * MEM_COST)
    sampler = Sampler(tmp_path / "usage", "hub1")
    try:
        sampler.open(
            "server:hub1:ada::2",
            "server",
            "ada",
            "alpha",
            cgroup.plan.version,
            cgroup.plan.job_dirs,
        )
        with _start_in(cgroup, ALLOC, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline().strip() == "ready"
            sampler.sample_once()
            journal = list_journals(tmp_path / "usage")[0]
            before = read_records(journal).records[-1].mem_peak_bytes
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "held"
            sampler.sample_once()
            proc.stdin.write("end\n")
            proc.stdin.flush()
            proc.wait(timeout=60)
        closed = sampler.close("server:hub1:ada::2", "stopped")
    finally:
        cgroup.remove()
    assert closed is not None
    assert closed.mem_peak_bytes - before == pytest.approx(MEM_COST, rel=0.05)


def test_a_server_and_a_job_of_two_courses_land_in_their_courses(
    tmp_path, cgroup_parent, session, monkeypatch
):
    folder = tmp_path / "usage"
    monkeypatch.setenv(USAGE_DIR_VAR, str(folder))
    cgroup = JobCgroup.create("server", None, None, parent=cgroup_parent)
    spawner = SimpleNamespace(
        user=SimpleNamespace(name="ada"),
        name="",
        user_options={"course": "alpha-2026"},
        runtime_dir=str(tmp_path),
        hub_id="hubtest",
        cgroup_root="/sys/fs/cgroup",
        proc_cgroup="/proc/self/cgroup",
        visible_gpus=[],
        environment={"KEEP": "1"},
        shares_hub_account=True,  # the job below runs as this test's own account
    )
    cgroup = open_server_usage(spawner, cgroup)
    try:
        proc = _start_in(cgroup, BUSY)
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        close_server_usage(spawner)
    finally:
        cgroup.remove()
    # where the server's runner jobs write: the hub's own folder, as the hub's own account
    expected = {"KEEP": "1", COURSE_VAR: "alpha-2026", USAGE_DIR_VAR: str(folder)}
    assert spawner.environment == expected

    script = tmp_path / "busy.py"
    script.write_text(BUSY)
    monkeypatch.setenv(COURSE_VAR, "beta-2026")
    backend = LocalBackend(tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False)
    result = submit(str(script), backend=backend, name="busy").wait(timeout_s=120)
    assert result.returncode == 0

    outcome = ingest_folder(session, folder)
    assert outcome.refused == []
    units = {u.kind: u for u in session.query(UsageUnit)}
    assert (units["server"].course_id, units["server"].username) == ("alpha-2026", "ada")
    assert units["job"].course_id == "beta-2026"
    assert units["job"].exit_reason == "exit 0"
    assert units["job"].cpu_s == pytest.approx(result.cpu_s)
    # the child's own total, interpreter start-up included (dearer on a loaded machine)
    assert units["server"].cpu_s == pytest.approx(rusage.ru_utime + rusage.ru_stime, rel=0.05)
    assert units["server"].cpu_s >= CPU_COST_S * 0.95
    by_course = {r.course_id: r for r in usage_report(session, by="course")}
    assert set(by_course) == {"alpha-2026", "beta-2026"}
    assert by_course["beta-2026"].cpu_hours == pytest.approx(result.cpu_s / 3600, abs=1e-6)
