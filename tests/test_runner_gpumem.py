"""GPU memory of runner jobs: budgets from profiles, what frameworks are told, NVML enforcement,
admission by memory, MPS's environment. NVML is a fake here; see the gpu-marked tests for a GPU."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from coursehub.contract import (
    ProfileError,
    gpu_mem_env,
    make_profile,
    profile_from_json,
    profile_to_json,
)
from coursehub.errors import UsageError
from coursehub.runner.api import make_spec, submit
from coursehub.runner.gpumem import (
    check_gpu_budget,
    describe_gpu_queue,
    gpu_budget_reason,
    plan_framework_env,
    plan_gpu_budget,
)
from coursehub.runner.jobenv import plan_gpu_env
from coursehub.runner.local import LocalBackend
from coursehub.runner.mps import plan_mps_env
from coursehub.runner.slots import AdmissionCancelledError, SlotPool
from helpers import wait_until

GIB = 1024**3
#: A "1.3 GB" job of the issue: 1.3 GiB.
JOB_BYTES = int(1.3 * GIB)


# --- budgets and what the frameworks are told (pure) ----------------------------------


@pytest.mark.parametrize(
    ("declared", "usable", "gpu_jobs", "expected"),
    [
        (JOB_BYTES, 14 * GIB, 4, JOB_BYTES),  # declared wins
        (None, 14 * GIB, 4, 14 * GIB // 4),  # else an equal share
        (None, None, 4, None),  # no NVML: no budget
        (None, 0, 4, None),
    ],
)
def test_a_job_budget_is_declared_or_an_equal_share(declared, usable, gpu_jobs, expected):
    assert plan_gpu_budget(declared, usable, gpu_jobs) == expected


def test_frameworks_are_told_the_budget_less_a_context():
    env = plan_framework_env(2 * GIB, 16 * GIB)
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    # 2 GiB less 512 MiB for the CUDA context, over 16 GiB
    assert env["COURSEHUB_GPU_MEM_FRACTION"] == "0.0938"
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.0938"
    assert plan_framework_env(None, 16 * GIB) == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    # a small budget keeps at least half of itself for the allocator
    assert plan_framework_env(GIB // 2, 16 * GIB)["COURSEHUB_GPU_MEM_FRACTION"] == "0.0156"


def test_the_over_budget_line_names_the_budget_and_the_peak():
    assert gpu_budget_reason(GIB, GIB, GIB) is None
    assert gpu_budget_reason(3 * GIB, 0, None) is None
    assert gpu_budget_reason(2 * GIB, 3 * GIB, GIB) == (
        "exceeded its GPU memory budget of 1.0 GiB (peak 3.0 GiB)"
    )


@pytest.mark.parametrize(
    ("ahead", "line"),
    [
        (0, "waiting for a GPU: 1st in line, needs 1.3 GiB"),
        (1, "waiting for a GPU: 2nd in line, needs 1.3 GiB"),
        (2, "waiting for a GPU: 3rd in line, needs 1.3 GiB"),
        (10, "waiting for a GPU: 11th in line, needs 1.3 GiB"),
        (20, "waiting for a GPU: 21st in line, needs 1.3 GiB"),
    ],
)
def test_a_waiting_job_sees_its_place_and_its_need(ahead, line):
    assert describe_gpu_queue(ahead, JOB_BYTES) == line


def test_a_budget_no_gpu_can_give_is_refused_by_name():
    check_gpu_budget(JOB_BYTES, [14 * GIB])
    check_gpu_budget(None, [14 * GIB])
    with pytest.raises(UsageError, match=r"gpu_mem_limit 20\.0 GiB .* \(14\.0 GiB"):
        check_gpu_budget(20 * GIB, [14 * GIB])


# --- the profile field ----------------------------------------------------------------


def test_a_profile_carries_a_gpu_budget_through_json_into_the_server():
    profile = make_profile("gpu-lstm", 2, "4G", gpus=1, jobs_per_gpu=10, gpu_mem_limit="1.3G")
    assert profile.gpu_mem_limit == int(1.3 * GIB)
    data = profile_to_json(profile)
    assert data["gpu_mem_limit"] == int(1.3 * GIB)
    assert profile_from_json(data) == profile
    assert gpu_mem_env(profile) == {"COURSEHUB_GPU_MEM_LIMIT": str(int(1.3 * GIB))}
    assert profile.describe().endswith("1 GPU (1.3 GiB a job)")


def test_a_profile_without_a_gpu_budget_reads_as_before():
    profile = make_profile("cpu", 2, "4G", gpu_mem_limit="")
    assert profile.gpu_mem_limit is None
    assert "gpu_mem_limit" not in profile_to_json(profile)
    assert gpu_mem_env(profile) == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpus": 1, "gpu_mem_limit": "lots"}, r"profile 'p': gpu_mem_limit: memory size"),
        ({"gpus": 1, "gpu_mem_limit": 0}, r"profile 'p': gpu_mem_limit: .*at least one byte|0"),
        ({"gpus": 0, "gpu_mem_limit": "1G"}, r"profile 'p': gpu_mem_limit .* needs a GPU"),
    ],
)
def test_a_bad_gpu_budget_names_the_profile_and_the_field(kwargs, message):
    with pytest.raises(ProfileError, match=message):
        make_profile("p", 1, "2G", **kwargs)


def test_the_runner_takes_the_budget_from_its_option_or_leaves_it_unset():
    spec = make_spec("x.py", gpus=1, gpu_mem_limit="1.3G")
    assert spec.resources.gpu_mem_limit == int(1.3 * GIB)
    assert make_spec("x.py", gpus=1).resources.gpu_mem_limit is None
    with pytest.raises(UsageError, match="--gpu-mem: memory size"):
        make_spec("x.py", gpus=1, gpu_mem_limit="big")


# --- MPS (no live daemon here: the environment it gives) ------------------------------


def _which(found: bool):
    return lambda name: f"/usr/bin/{name}" if found else None


def test_mps_is_off_by_default_and_without_the_control_program():
    assert plan_mps_env({}, 10, _which(True)) == {}
    assert plan_mps_env({"COURSEHUB_GPU_MPS": "1"}, 10, _which(False)) == {}


def test_mps_clients_get_the_daemon_folders_and_their_share_of_the_sms():
    env = plan_mps_env(
        {"COURSEHUB_GPU_MPS": "1", "COURSEHUB_GPU_MPS_DIR": "/run/mps"}, 10, _which(True)
    )
    assert env == {
        "CUDA_MPS_PIPE_DIRECTORY": "/run/mps/pipe",
        "CUDA_MPS_LOG_DIRECTORY": "/run/mps/log",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "10",
    }
    assert (
        plan_mps_env({"COURSEHUB_GPU_MPS": "on"}, 200, _which(True))[
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
        ]
        == "1"
    )


def test_a_gpu_job_env_joins_budget_and_mps():
    env = plan_gpu_env(2 * GIB, 16 * GIB, 4, {})
    assert env["COURSEHUB_GPU_MEM_FRACTION"] == "0.0938"
    assert "CUDA_MPS_PIPE_DIRECTORY" not in env


# --- admission by memory --------------------------------------------------------------


def _card(tmp_path: Path, gpu_jobs: int = 16) -> SlotPool:
    """One 16 GiB GPU, 2 GiB reserved, up to ``gpu_jobs`` jobs, 16 CPU slots."""
    return SlotPool(
        tmp_path / "slots",
        16,
        gpu_count=1,
        gpu_jobs=gpu_jobs,
        poll_s=0.02,
        gpu_mem_total=[16 * GIB],
        gpu_mem_reserve=2 * GIB,
    )


def test_ten_jobs_of_1_3_gib_share_a_16_gib_card_and_the_eleventh_waits(tmp_path):
    pool = _card(tmp_path)
    leases = [pool.acquire(1, 1, gpu_mem_bytes=JOB_BYTES) for _ in range(10)]
    assert all(lease.gpu_indices == (0,) for lease in leases)
    seen: list[int] = []
    granted = threading.Event()
    cancelled = threading.Event()

    def eleventh() -> None:
        lease = pool.acquire(1, 1, seen.append, cancelled, gpu_mem_bytes=JOB_BYTES)
        granted.set()
        lease.release()

    waiter = threading.Thread(target=eleventh)
    waiter.start()
    try:
        wait_until(lambda: seen, what="the eleventh job told its place")
        assert seen == [0] and not granted.is_set()  # first in line, no room: 14.3 > 14 GiB
        leases.pop().release()
        assert granted.wait(10), "the eleventh job was not admitted once one had ended"
    finally:
        cancelled.set()
        waiter.join(10)
        for lease in leases:
            lease.release()


def test_a_job_without_a_budget_counts_for_an_equal_share(tmp_path):
    pool = _card(tmp_path, gpu_jobs=4)  # shares of 14 GiB / 4 = 3.5 GiB
    assert pool.gpu_budget(None) == 14 * GIB // 4
    leases = [pool.acquire(1, 1) for _ in range(3)]
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(AdmissionCancelledError):  # 3 x 3.5 + 4 > 14 GiB: no room
        pool.acquire(1, 1, cancelled=cancelled, gpu_mem_bytes=4 * GIB)
    lease = pool.acquire(1, 1, gpu_mem_bytes=3 * GIB)
    for held in [*leases, lease]:
        held.release()


def test_a_budget_larger_than_the_card_is_refused(tmp_path):
    with pytest.raises(ValueError, match="fits on no GPU"):
        _card(tmp_path).acquire(1, 1, gpu_mem_bytes=15 * GIB)


SLEEPER = """
    import sys, time
    print("started", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def _script(tmp_path: Path, name: str = "sleeper.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(SLEEPER))
    return str(path)


def test_a_job_that_fits_nowhere_shows_its_place_in_line(tmp_path):
    pool = _card(tmp_path)
    leases = [pool.acquire(1, 1, gpu_mem_bytes=JOB_BYTES) for _ in range(10)]
    backend = LocalBackend(tmp_path / "runs", pool, use_cgroups=False, grace_s=1.0)
    first = submit(_script(tmp_path), ["0"], gpus=1, gpu_mem_limit="1.3G", backend=backend)
    second = None
    try:
        # the second is submitted once the first waits: two submitted at once may queue
        # in either order
        wait_until(lambda: "1st in line" in first.output(), what="the first waiter's line")
        second = submit(_script(tmp_path), ["0"], gpus=1, gpu_mem_limit="1.3G", backend=backend)
        wait_until(lambda: "2nd in line" in second.output(), what="the second waiter's line")
        assert "[coursehub] waiting for a GPU: 1st in line, needs 1.3 GiB" in first.output()
        assert "[coursehub] waiting for a GPU: 2nd in line, needs 1.3 GiB" in second.output()
        leases.pop().release()
        assert first.wait(timeout_s=30).ok
        leases.pop().release()
        assert second.wait(timeout_s=30).ok
    finally:
        first.cancel()
        if second is not None:
            second.cancel()
        for lease in leases:
            lease.release()


# --- enforcement through NVML (a fake NVML that reports this test's child processes) --


class FakeNvml:
    """pynvml's functions over one 16 GiB GPU whose processes are this test's descendants.

    A descendant whose command line holds ``hog`` uses ``hog_bytes``, any other
    ``small_bytes`` (``usedGpuMemory``, as ``nvmlDeviceGetComputeRunningProcesses``
    reports it).
    """

    NVMLError = RuntimeError

    def __init__(self, hog_bytes: int, small_bytes: int) -> None:
        self.hog_bytes, self.small_bytes = hog_bytes, small_bytes
        self.device = {"name": "Fake 16G", "uuid": "GPU-fake"}

    def nvmlInit(self) -> None: ...  # noqa: N802 (pynvml's names)

    def nvmlShutdown(self) -> None: ...  # noqa: N802 (pynvml's names)

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 (pynvml's names)
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, str]:  # noqa: N802 (pynvml's names)
        return self.device

    def nvmlDeviceGetName(self, handle: dict[str, str]) -> str:  # noqa: N802 (pynvml's names)
        return handle["name"]

    def nvmlDeviceGetUUID(self, handle: dict[str, str]) -> str:  # noqa: N802 (pynvml's names)
        return handle["uuid"]

    def nvmlDeviceGetMemoryInfo(self, handle: dict[str, str]) -> SimpleNamespace:  # noqa: N802 (pynvml's names)
        return SimpleNamespace(total=16 * GIB, used=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: dict[str, str]) -> list:  # noqa: N802 (pynvml's names)
        found = []
        for proc in psutil.Process().children(recursive=True):
            try:
                hog = any("hog" in part for part in proc.cmdline())
            except psutil.Error:
                continue
            used = self.hog_bytes if hog else self.small_bytes
            found.append(SimpleNamespace(pid=proc.pid, usedGpuMemory=used))
        return found


def test_a_job_over_its_gpu_budget_is_stopped_and_the_others_go_on(tmp_path):
    pool = _card(tmp_path, gpu_jobs=4)
    nvml = FakeNvml(hog_bytes=2 * GIB, small_bytes=GIB // 2)
    backend = LocalBackend(
        tmp_path / "runs", pool, use_cgroups=False, grace_s=1.0, sample_s=0.1, nvml=nvml
    )
    small = submit(_script(tmp_path), ["2"], gpus=1, gpu_mem_limit="1G", backend=backend)
    hog = submit(_script(tmp_path, "hog.py"), ["60"], gpus=1, gpu_mem_limit="1G", backend=backend)
    hog_result = hog.wait(timeout_s=30)  # stopped long before its 60 s sleep
    assert hog_result.killed_reason == "exceeded its GPU memory budget of 1.0 GiB (peak 2.0 GiB)"
    assert hog_result.elapsed_s < 10
    assert "killed: exceeded its GPU memory budget of 1.0 GiB (peak 2.0 GiB)" in hog.output()
    small_result = small.wait(timeout_s=30)
    assert small_result.ok and small_result.killed_reason is None
    assert small_result.gpu_peak_bytes == GIB // 2
    # both slots are free again: four more jobs of 1 GiB are admitted at once
    leases = [pool.acquire(1, 1, gpu_mem_bytes=GIB) for _ in range(4)]
    for lease in leases:
        lease.release()


def test_a_job_under_its_gpu_budget_runs_to_the_end(tmp_path):
    nvml = FakeNvml(hog_bytes=2 * GIB, small_bytes=GIB // 2)
    backend = LocalBackend(tmp_path / "runs", _card(tmp_path), use_cgroups=False, nvml=nvml)
    result = submit(
        _script(tmp_path, "hog.py"), ["0.5"], gpus=1, gpu_mem_limit="3G", backend=backend
    ).wait(timeout_s=30)
    assert result.ok and result.killed_reason is None
    assert result.gpu_peak_bytes == 2 * GIB


def test_the_server_carries_the_profile_budget_to_the_runner(monkeypatch):
    import argparse

    from coursehub.runner.cli import register, spec_options
    from coursehub.spawn.profiles import spawner_override

    profile = make_profile("gpu-lstm", 2, "4G", gpus=1, jobs_per_gpu=10, gpu_mem_limit="1.3G")
    for kind in ("local", "systemd", "slurm", "kubernetes"):
        env = spawner_override(profile, kind, gpu_ids=[0])["environment"]
        assert env["COURSEHUB_GPU_MEM_LIMIT"] == str(JOB_BYTES)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    monkeypatch.setenv("COURSEHUB_GPU_MEM_LIMIT", str(JOB_BYTES))
    _, _, options = spec_options(parser.parse_args(["run", "--gpus", "1", "--", "x.py"]))
    assert options["gpu_mem_limit"] == str(JOB_BYTES)
    _, _, options = spec_options(parser.parse_args(["run", "--", "x.py"]))  # no GPU: no budget
    assert options["gpu_mem_limit"] is None
    args = parser.parse_args(["run", "--gpus", "1", "--gpu-mem", "2G", "--", "x.py"])
    assert spec_options(args)[2]["gpu_mem_limit"] == "2G"
