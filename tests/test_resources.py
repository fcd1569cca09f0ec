"""coursehub.resources: units, ResourceSpec, effective_cpus on fake and real cgroup trees, GPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from coursehub.errors import UsageError
from coursehub.resources.cgroupfs import locate_controller, parse_proc_cgroup
from coursehub.resources.cpus import (
    affinity_cpus,
    effective_cpus,
    parse_cfs_quota,
    parse_cpu_list,
    parse_cpu_max,
)
from coursehub.resources.gpus import gpu_inventory, gpu_memory_of
from coursehub.resources.spec import ResourceSpec
from coursehub.resources.units import (
    describe_duration,
    describe_mem,
    format_mem,
    parse_duration,
    parse_mem,
)

GiB = 1024**3


@pytest.mark.parametrize(
    ("text", "mem_bytes"),
    [
        ("4G", 4 * GiB),
        ("512M", 512 * 1024**2),
        ("1.5G", 1536 * 1024**2),
        ("2K", 2048),
        ("1T", 1024**4),
        ("100m", 100 * 1024**2),
        ("12345", 12345),
        (4096, 4096),
    ],
)
def test_parse_mem(text, mem_bytes):
    assert parse_mem(text) == mem_bytes


@pytest.mark.parametrize("bad", ["4X", "", "G", "-1G", "four", "0", "1.5.2G", True])
def test_parse_mem_rejects(bad):
    with pytest.raises(UsageError, match="memory size"):
        parse_mem(bad)


@pytest.mark.parametrize("mem_bytes", [2 * GiB, 1536 * 1024**2, 1000, 3 * 1024**4, 7 * 1024])
def test_format_mem_round_trips(mem_bytes):
    assert parse_mem(format_mem(mem_bytes)) == mem_bytes


def test_format_and_describe_mem():
    assert format_mem(2 * GiB) == "2G"
    assert format_mem(1536 * 1024**2) == "1536M"
    assert describe_mem(2 * GiB) == "2.0 GiB"
    assert describe_mem(100 * 1024**2) == "100.0 MiB"
    assert describe_mem(512) == "512 B"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("90s", 90), ("1h", 3600), ("1.5h", 5400), ("45", 45), ("2d", 172800), (7, 7)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["-3", "0", "10x", "", "m", "1 hour", 0, -1.0])
def test_parse_duration_rejects(bad):
    with pytest.raises(UsageError, match="duration"):
        parse_duration(bad)


def test_describe_duration():
    assert describe_duration(30) == "30 s"
    assert describe_duration(2.5) == "2.5 s"
    assert describe_duration(1800) == "30 min"


def test_resource_spec_defaults_threads_from_cpu_limit():
    assert ResourceSpec(cpu_limit=2.9).n_threads == 2
    assert ResourceSpec(cpu_limit=0.5).n_threads == 1
    assert ResourceSpec(n_threads=3).cpu_limit == 3.0
    spec = ResourceSpec()
    assert (spec.cpu_limit, spec.n_threads, spec.mem_limit, spec.gpus) == (1.0, 1, None, 0)
    assert ResourceSpec(cpu_limit=4, n_threads=2).n_threads == 2


def test_resource_spec_is_frozen():
    spec = ResourceSpec(cpu_limit=2, mem_limit=parse_mem("4G"))
    with pytest.raises(AttributeError):
        spec.n_threads = 4  # type: ignore[misc]
    assert spec.mem_limit == 4 * GiB


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_threads": 0},
        {"cpu_limit": 0},
        {"cpu_limit": float("nan")},
        {"mem_limit": 0},
        {"mem_limit": "4G"},
        {"gpus": -1},
        {"n_threads": 1.5},
    ],
)
def test_resource_spec_rejects(kwargs):
    with pytest.raises(UsageError):
        ResourceSpec(**kwargs)


def test_parsers_of_cgroup_files():
    assert parse_cpu_max("50000 100000") == 0.5
    assert parse_cpu_max("max 100000") is None
    assert parse_cfs_quota("-1", "100000") is None
    assert parse_cfs_quota("150000", "100000") == 1.5
    assert parse_cpu_list("0-3,8") == 5
    assert parse_cpu_list("") == 0
    entries = parse_proc_cgroup("4:memory:/a/b\n1:cpu,cpuacct:/\n0::/user.slice\njunk\n")
    assert [(e.hierarchy_id, e.controllers, e.path) for e in entries] == [
        (4, ("memory",), "/a/b"),
        (1, ("cpu", "cpuacct"), "/"),
        (0, (), "/user.slice"),
    ]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_v1(tmp_path):
    """A v1 tree: cpu,cpuacct with a 3-CPU quota on the parent, 1.5 on the process's own group."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc-self-cgroup"
    cpu = root / "cpu,cpuacct"
    _write(cpu / "cpu.cfs_quota_us", "-1")
    _write(cpu / "cpu.cfs_period_us", "100000")
    _write(cpu / "jobs" / "cpu.cfs_quota_us", "300000")
    _write(cpu / "jobs" / "cpu.cfs_period_us", "100000")
    _write(cpu / "jobs" / "alice" / "cpu.cfs_quota_us", "150000")
    _write(cpu / "jobs" / "alice" / "cpu.cfs_period_us", "100000")
    _write(root / "cpuset" / "cpuset.effective_cpus", "0-63")
    _write(proc, "3:cpuset:/\n2:cpu,cpuacct:/jobs/alice\n1:memory:/jobs/alice\n0::/\n")
    return root, proc


def test_effective_cpus_v1_takes_own_cgroup_quota(fake_v1):
    root, proc = fake_v1
    assert effective_cpus(root, proc) == min(1.5, affinity_cpus())


def test_effective_cpus_v1_parent_quota_caps_child(fake_v1):
    root, proc = fake_v1
    _write(root / "cpu,cpuacct" / "jobs" / "cpu.cfs_quota_us", "50000")
    assert effective_cpus(root, proc) == 0.5


def test_effective_cpus_v1_skips_levels_missing_in_a_container(fake_v1):
    root, proc = fake_v1
    _write(proc, "2:cpu,cpuacct:/docker/abc123\n")
    _write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "200000")
    assert effective_cpus(root, proc) == min(2.0, affinity_cpus())


@pytest.fixture
def fake_v2(tmp_path):
    root, proc = tmp_path / "cgroup", tmp_path / "proc-self-cgroup"
    _write(root / "cgroup.controllers", "cpuset cpu io memory pids")
    _write(root / "cpu.max", "max 100000")
    _write(root / "user.slice" / "cpu.max", "250000 100000")
    _write(root / "user.slice" / "u.scope" / "cpu.max", "max 100000")
    _write(root / "user.slice" / "u.scope" / "cpuset.cpus.effective", "0-1")
    _write(proc, "0::/user.slice/u.scope\n")
    return root, proc


def test_effective_cpus_v2_takes_ancestor_quota_and_cpuset(fake_v2):
    root, proc = fake_v2
    assert effective_cpus(root, proc) == min(2.0, affinity_cpus())
    _write(root / "user.slice" / "cpu.max", "50000 100000")
    assert effective_cpus(root, proc) == 0.5


def test_hybrid_host_prefers_v1_controller(tmp_path):
    root, proc = tmp_path / "cgroup", tmp_path / "proc"
    _write(root / "cpu" / "cpu.cfs_quota_us", "-1")
    _write(root / "unified" / "cgroup.controllers", "")
    _write(proc, "1:cpu:/\n0::/\n")
    cpu = locate_controller("cpu", root, proc)
    assert cpu is not None and cpu.version == 1 and cpu.mount == root / "cpu"
    assert locate_controller("memory", root, proc) is None


def test_no_cgroup_files_means_affinity(tmp_path):
    assert effective_cpus(tmp_path / "none", tmp_path / "none") == float(affinity_cpus())


def test_effective_cpus_real_matches_affinity_or_less():
    cpus = effective_cpus()
    assert 0 < cpus <= affinity_cpus()


@pytest.mark.root
def test_effective_cpus_real_quota_in_a_child_cgroup(cgroup_parent):
    """A child process moved into a 0.5-CPU job cgroup reports 0.5 CPUs."""
    from coursehub.resources.cgroups import JobCgroup

    job = JobCgroup.create("quota-probe", 0.5, None, parent=cgroup_parent)
    try:
        procs = os.pathsep.join(str(p) for p in job.procs_files)
        code = (
            "import os\n"
            "for p in os.environ['PROCS'].split(os.pathsep): open(p, 'w').write(str(os.getpid()))\n"
            "from coursehub.resources.cpus import effective_cpus\nprint(effective_cpus())\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PROCS": procs},
            capture_output=True,
            text=True,
            check=True,
        )
        assert float(out.stdout) == 0.5
    finally:
        job.remove()


class FakeNVMLError(Exception):
    pass


def fake_nvml(devices):
    """An object with pynvml's functions over ``devices`` (dicts)."""
    calls = []

    def handle(index):
        if devices[index] is None:
            raise FakeNVMLError("lost")
        return devices[index]

    return SimpleNamespace(
        NVMLError=FakeNVMLError,
        calls=calls,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetName=lambda h: h["name"],
        nvmlDeviceGetUUID=lambda h: h["uuid"],
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=h["total"], used=h["used"]),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=pid, usedGpuMemory=mem) for pid, mem in h["procs"]
        ],
    )


def test_gpu_inventory_parses_nvml():
    nvml = fake_nvml(
        [
            {
                "name": b"NVIDIA A40",
                "uuid": "GPU-1",
                "total": 48 * GiB,
                "used": 3 * GiB,
                "procs": [(101, 1250 * 1024**2), (102, None)],
            },
            None,
            {"name": "NVIDIA A40", "uuid": b"GPU-3", "total": 48 * GiB, "used": 0, "procs": []},
        ]
    )
    gpus = gpu_inventory(nvml)
    assert [(g.index, g.name, g.uuid) for g in gpus] == [
        (0, "NVIDIA A40", "GPU-1"),
        (2, "NVIDIA A40", "GPU-3"),
    ]
    assert gpus[0].mem_total_bytes == 48 * GiB and gpus[0].mem_used_bytes == 3 * GiB
    assert [(p.pid, p.used_mem_bytes) for p in gpus[0].processes] == [
        (101, 1250 * 1024**2),
        (102, 0),
    ]
    assert gpu_memory_of({101, 999}, gpus) == 1250 * 1024**2
    assert nvml.calls == []  # a caller's NVML is neither initialised nor shut down here


def test_gpu_inventory_without_gpu_is_empty():
    """This machine's real path: no driver (or no pynvml) gives [], no error."""
    if Path("/dev/nvidiactl").exists():
        pytest.skip("a GPU driver is present")
    assert gpu_inventory() == []


@pytest.mark.gpu
def test_gpu_inventory_real():
    if not Path("/dev/nvidiactl").exists():
        pytest.skip("no NVIDIA GPU here")
    gpus = gpu_inventory()
    assert gpus and all(g.mem_total_bytes > 0 and g.uuid.startswith("GPU-") for g in gpus)
