"""GPU accounting: peak GPU memory of a server's cgroup through NVML, GPU-seconds as GPUs held x
wall time, and the list of servers holding a GPU with no kernel busy.

There is no GPU here: NVML is a fake with pynvml's functions (the pattern of
tests/test_resources.py), the cgroup a folder with the kernel's file names.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from coursehub.catalog.models.usage import UsageUnit
from coursehub.catalog.usage.ingest import ingest_folder
from coursehub.catalog.usage.rollup import apply_records
from coursehub.meter.bounds import HostLimits
from coursehub.meter.gpuread import GpuReader, cgroup_pids, parse_procs
from coursehub.meter.journal import list_journals, read_records
from coursehub.meter.sampler import Sampler
from coursehub.usage.idlegpu import (
    IDLE_AFTER_S,
    gpu_holders,
    parse_server_name,
    plan_idle_gpu_servers,
)
from coursehub.usage.report import usage_report

MiB = 2**20


class FakeNVMLError(Exception):
    pass


def fake_nvml(devices):
    """pynvml's functions over ``devices`` (dicts; a test changes ``procs`` between samples)."""
    calls = []

    def count():
        calls.append("count")
        return len(devices)

    return SimpleNamespace(
        NVMLError=FakeNVMLError,
        calls=calls,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=count,
        nvmlDeviceGetHandleByIndex=lambda index: devices[index],
        nvmlDeviceGetName=lambda h: "NVIDIA A40",
        nvmlDeviceGetUUID=lambda h: h["uuid"],
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=48 * 2**30, used=0),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in h["procs"]
        ],
    )


def cgroup_dir(path, pids, cpu_s=2.0, child_pids=()):
    """A cgroup v1 directory with its counters and pids (and a child group with more pids)."""
    path.mkdir(parents=True)
    (path / "cpuacct.usage").write_text(f"{int(cpu_s * 1e9)}\n")
    (path / "memory.usage_in_bytes").write_text(f"{64 * MiB}\n")
    (path / "memory.max_usage_in_bytes").write_text(f"{96 * MiB}\n")
    (path / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
    if child_pids:
        (path / "child").mkdir()
        (path / "child" / "cgroup.procs").write_text("".join(f"{p}\n" for p in child_pids))
    return path


def records(folder):
    return [r for path in list_journals(folder) for r in read_records(path).records]


@pytest.mark.parametrize(
    ("text", "pids"),
    [("101\n102\n", {101, 102}), ("", set()), ("7\n\nnot-a-pid\n", {7})],
)
def test_the_pids_of_a_cgroup_procs_file_are_read_one_a_line(text, pids):
    assert parse_procs(text) == pids


def test_a_cgroups_pids_include_its_child_groups_and_a_gone_group_adds_none(tmp_path):
    group = cgroup_dir(tmp_path / "srv", [101], child_pids=[102])
    assert cgroup_pids([group, tmp_path / "gone"]) == {101, 102}


def test_the_hub_sampler_records_a_gpu_servers_peak_gpu_memory_and_gpu_seconds(tmp_path):
    gpu = {"uuid": "GPU-1", "procs": [(101, 900 * MiB), (555, 5000 * MiB)]}  # 555: not the server
    nvml = fake_nvml([gpu])
    sampler = Sampler(tmp_path / "usage", "hub1", gpus=GpuReader(nvml))
    group = cgroup_dir(tmp_path / "cg" / "srv", [101], child_pids=[102])
    sampler.open("server:hub1:ada::1", "server", "ada", "alpha", 1, (group,), n_gpus=2)
    sampler.sample_once()
    gpu["procs"] = [(101, 300 * MiB), (102, 1200 * MiB)]  # a child process allocates more
    sampler.sample_once()
    gpu["procs"] = [(101, 100 * MiB)]  # freed: the peak stays
    closed = sampler.close("server:hub1:ada::1", "stopped")
    assert closed is not None
    samples = [r for r in records(tmp_path / "usage") if r.event != "open"]
    assert [r.gpu_peak_bytes for r in samples] == [900 * MiB, 1500 * MiB, 1500 * MiB]
    assert closed.gpu_s == pytest.approx(2 * (closed.at - closed.started_at))  # GPUs x wall time
    assert nvml.calls == ["count"] * 3  # the sampler's NVML is neither initialised nor shut down


def test_a_server_without_a_gpu_is_never_asked_of_nvml(tmp_path):
    nvml = fake_nvml([{"uuid": "GPU-1", "procs": [(101, 900 * MiB)]}])
    sampler = Sampler(tmp_path / "usage", "hub1", gpus=GpuReader(nvml))
    group = cgroup_dir(tmp_path / "cg" / "srv", [101])
    sampler.open("server:hub1:bob::1", "server", "bob", "alpha", 1, (group,), n_gpus=0)
    sampler.sample_once()
    closed = sampler.close("server:hub1:bob::1", "stopped")
    assert closed is not None and (closed.gpu_s, closed.gpu_peak_bytes) == (0.0, 0)
    assert nvml.calls == []


def test_the_gpu_figures_reach_the_catalog_and_the_report(session, tmp_path):
    gpu = {"uuid": "GPU-1", "procs": [(101, 2048 * MiB)]}
    sampler = Sampler(tmp_path / "usage", "hub1", gpus=GpuReader(fake_nvml([gpu])))
    group = cgroup_dir(tmp_path / "cg" / "srv", [101])
    sampler.open("server:hub1:ada::1", "server", "ada", "alpha", 1, (group,), n_gpus=1)
    sampler.sample_once()
    closed = sampler.close("server:hub1:ada::1", "stopped")
    assert closed is not None
    one_gpu = HostLimits(cpus=4, mem_bytes=64 * 2**30, gpus=1, gpu_mem_bytes=80 * 2**30)
    assert ingest_folder(session, tmp_path / "usage", limits=one_gpu).refused == []
    unit = session.query(UsageUnit).one()
    assert unit.gpu_peak_bytes == 2048 * MiB and unit.gpu_s == pytest.approx(closed.gpu_s)
    [row] = usage_report(session, "alpha", by="student")
    assert row.gpu_hours == pytest.approx(round(closed.gpu_s / 3600, 6))


@pytest.mark.parametrize(
    ("unit_id", "user", "name"),
    [
        ("server:hub1:ada::1700000000000", "ada", ""),
        ("server:hub1:ada:gpu:1700000000000", "ada", "gpu"),
        ("server:hub:a:b:ada:gpu:1", "ada", "gpu"),  # a hub id with colons
        ("server:hub1:bob::1", "ada", None),  # another user's unit
        ("job:host:123", "ada", None),
    ],
)
def test_a_server_units_id_names_its_server(unit_id, user, name):
    assert parse_server_name(unit_id, user) == name


NOW = datetime(2026, 10, 5, 14, 0, tzinfo=UTC)


def unit(user, name="", gpu_s=3600.0, started=NOW - timedelta(hours=2)):
    return SimpleNamespace(
        unit_id=f"server:hub1:{user}:{name}:1",
        username=user,
        started_at=started,
        gpu_s=gpu_s,
        gpu_peak_bytes=512 * MiB,
    )


def hub_user(last_activity, ready=True, name=""):
    return {"servers": {name: {"ready": ready, "last_activity": last_activity}}}


def ago(seconds):
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


#: (hub user model, listed?): the hub's activity is the busy-kernel extension's report
IDLE_CASES = [
    (hub_user(ago(60)), False),  # a busy kernel refreshes the activity every 60 s
    (hub_user(ago(IDLE_AFTER_S - 1)), False),  # one activity report late: not accused
    (hub_user(ago(IDLE_AFTER_S)), True),
    (hub_user(ago(3 * 3600)), True),
    (hub_user(None), True),  # no activity since its start, two hours ago
    (hub_user(ago(3 * 3600), ready=False), False),  # stopped since its last record
    (hub_user(ago(3 * 3600), name="other"), False),  # another server of the user runs
    (None, False),  # no hub account any more
]


@pytest.mark.parametrize(("model", "listed"), IDLE_CASES)
def test_a_server_holding_a_gpu_is_listed_only_when_its_hub_activity_is_old(model, listed):
    rows = plan_idle_gpu_servers([unit("ada")], {"ada": model}, NOW)
    assert [r.username for r in rows] == (["ada"] if listed else [])


def test_the_idle_gpu_list_puts_the_longest_idle_first_with_its_figures():
    holders = [unit("ada"), unit("bob", name="gpu")]
    users = {"ada": hub_user(ago(1800)), "bob": hub_user(ago(5400), name="gpu")}
    rows = plan_idle_gpu_servers(holders, users, NOW)
    assert [(r.username, r.server_name, r.idle_s) for r in rows] == [
        ("bob", "gpu", 5400.0),
        ("ada", "", 1800.0),
    ]
    assert (rows[0].gpu_hours, rows[0].gpu_peak_mib) == (1.0, 512.0)
    assert rows[0].last_activity == NOW - timedelta(seconds=5400)


def test_only_a_courses_running_servers_holding_a_gpu_are_holders(session):
    now = datetime.now(UTC).timestamp()

    def rec(event, unit_id, user, course, gpu_s, kind="server"):
        from coursehub.meter.records import UsageRecord

        return UsageRecord(event, unit_id, kind, user, course, now, now - 600, 1.0, 0, gpu_s)

    apply_records(
        session,
        [
            rec("sample", "server:h:ada::1", "ada", "alpha", 600.0),
            rec("sample", "server:h:bob::1", "bob", "alpha", 0.0),  # no GPU
            rec("close", "server:h:cy::1", "cy", "alpha", 600.0),  # stopped
            rec("sample", "job:h:1", "ada", "alpha", 600.0, kind="job"),  # a job, not a server
            rec("sample", "server:h:dan::1", "dan", "beta", 600.0),  # another course
        ],
    )
    holders = gpu_holders(session, "alpha", datetime.now(UTC))
    assert [h.username for h in holders] == ["ada"]
