"""The Slurm backend's pure parts: batch script (golden), Slurm's output parsed, results."""

from __future__ import annotations

from pathlib import Path

import pytest

from coursehub.errors import UsageError
from coursehub.resources.spec import ResourceSpec
from coursehub.runner.api import backend_name, make_backend
from coursehub.runner.control import is_slurm_job_id, job_status
from coursehub.runner.job import JobSpec
from coursehub.runner.local import LocalBackend
from coursehub.runner.slurm.backend import SlurmBackend
from coursehub.runner.slurm.commands import (
    explain_sbatch_error,
    parse_exit_code,
    parse_sacct,
    parse_scontrol_record,
    parse_slurm_duration,
    parse_slurm_mem,
)
from coursehub.runner.slurm.plan import (
    SlurmPlacement,
    plan_never_starts,
    plan_result,
    render_batch_script,
    render_sbatch_args,
    time_limit_minutes,
)
from helpers import assert_matches_golden

GiB = 1024**3
TRAIN = JobSpec(
    "coursehub.pendulum.train",
    ("lstm", "5", "2"),
    module=True,
    resources=ResourceSpec(mem_limit=4 * GiB, n_threads=2),
    timeout_s=90,
    cwd="/home/alice/course",
    env={"COURSE": "phys 101"},
)
GPU_TRAIN = JobSpec(
    "train.py",
    ("model.pt",),
    resources=ResourceSpec(mem_limit=16 * GiB, n_threads=4, gpus=2),
    timeout_s=3600,
    cwd="/home/alice",
)
GPU_PLACEMENT = SlurmPlacement(partition="gpu", account="phys101", qos="course")
OUT = "/home/alice/.cache/coursehub/runs/slurm-%j.log"
USAGE = "/home/alice/.cache/coursehub/runs/slurm-%j.usage.json"


def test_a_batch_script_asks_for_threads_memory_and_time_and_sets_the_thread_env():
    script = render_batch_script(TRAIN, SlurmPlacement(), OUT, USAGE, "/usr/bin/python3")
    assert_matches_golden(script, "slurm_batch_cpu.sh.golden")
    assert "#SBATCH --cpus-per-task=2\n" in script
    assert "export OMP_NUM_THREADS=2\n" in script
    assert "export CUDA_VISIBLE_DEVICES=''\n" in script


def test_a_gpu_profile_renders_gres_gpu_n_and_leaves_cuda_devices_to_slurm():
    script = render_batch_script(GPU_TRAIN, GPU_PLACEMENT, OUT, USAGE, "/usr/bin/python3")
    assert_matches_golden(script, "slurm_batch_gpu.sh.golden")
    assert "#SBATCH --gres=gpu:2\n" in script
    assert "CUDA_VISIBLE_DEVICES" not in script
    assert "#SBATCH --partition=gpu\n#SBATCH --account=phys101\n#SBATCH --qos=course\n" in script


def test_a_job_that_must_not_inherit_the_callers_environment_exports_none():
    spec = JobSpec("grade.py", inherit_env=False, env={"HOME": "/tmp/x"})
    args = render_sbatch_args(spec, SlurmPlacement(), "out.log")
    assert args[-1] == "--export=NONE"
    assert "--export=ALL" in render_sbatch_args(JobSpec("a.py"), SlurmPlacement(), "o")


@pytest.mark.parametrize(
    ("timeout_s", "grace_s", "minutes"),
    [(1, 5, 1), (55, 5, 1), (56, 5, 2), (90, 5, 2), (3600, 5, 61)],
)
def test_slurms_time_limit_is_whole_minutes_behind_the_runners(timeout_s, grace_s, minutes):
    assert time_limit_minutes(timeout_s, grace_s) == minutes


def test_scontrol_records_keep_values_with_spaces():
    line = (
        "JobId=7 JobName=train UserId=alice(1000) JobState=PENDING Reason=Resources "
        "Dependency=(null) ExitCode=0:0 RunTime=00:00:00 Command=/bin/x a b StdOut=/r/slurm-7.log"
    )
    record = parse_scontrol_record(line)
    assert record["JobState"] == "PENDING"
    assert record["Reason"] == "Resources"
    assert record["Command"] == "/bin/x a b"
    assert record["StdOut"] == "/r/slurm-7.log"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:00:05", 5.0),
        ("1-02:03:04", 93784.0),
        ("01:02.500", 62.5),
        ("", None),
        ("INVALID", None),
    ],
)
def test_slurm_durations_are_read_in_seconds(text, seconds):
    assert parse_slurm_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"), [("54084K", 54084 * 1024), ("1.5M", 1572864), ("0", 0), ("", None)]
)
def test_slurm_memory_figures_are_read_in_bytes(text, size):
    assert parse_slurm_mem(text) == size


def test_exit_codes_and_sacct_lines_are_read():
    assert parse_exit_code("0:9") == (0, 9)
    assert parse_exit_code("") == (0, 0)
    usage = parse_sacct("00:01:40|00:03:10|\n00:01:40|00:03:10|512000K\n")
    assert usage == {"elapsed_s": 100.0, "cpu_s": 190.0, "peak_rss_bytes": 512000 * 1024}
    assert parse_sacct("") is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Batch job submission failed: Invalid partition name specified",
            "unknown Slurm partition 'gpu'",
        ),
        (
            "Batch job submission failed: Requested node configuration is not available",
            "no node of partition 'gpu' is large enough for this job (4 CPUs)",
        ),
        (
            "Batch job submission failed: Invalid generic resource (gres) specification",
            "partition 'gpu' has no GPUs that Slurm manages as GRES (4 CPUs)",
        ),
        ("Batch job submission failed: Something new", "Slurm refused the job: "),
    ],
)
def test_sbatch_refusals_become_one_line_naming_the_request(message, expected):
    assert explain_sbatch_error(message, "4 CPUs", "gpu").startswith(expected)


def test_a_job_slurm_killed_for_memory_names_the_job_and_its_limit_and_never_exits_0():
    info = {"JobState": "OUT_OF_MEMORY", "ExitCode": "0:125", "RunTime": "00:00:02"}
    result = plan_result("12", TRAIN, Path("l.log"), info, None, None, 300 * 1024**2)
    assert result.killed_reason == (
        "Slurm job 12 exceeded its memory limit of 4.0 GiB (OUT_OF_MEMORY)"
    )
    assert result.returncode != 0
    assert result.peak_rss_bytes == 300 * 1024**2
    assert result.elapsed_s == 2.0


def test_slurms_time_limit_node_failure_and_the_jobs_own_limit_are_reported():
    timeout = plan_result("3", TRAIN, Path("l"), {"JobState": "TIMEOUT"}, None, None, None)
    assert timeout.killed_reason == "Slurm job 3 exceeded its time limit of 1.5 min (TIMEOUT)"
    failed = plan_result("4", TRAIN, Path("l"), {"JobState": "NODE_FAIL"}, None, None, None)
    assert failed.killed_reason == "Slurm job 4 was lost: its node failed (NODE_FAIL)"
    assert failed.returncode == 1
    own = {"returncode": -15, "killed_reason": "exceeded its time limit of 3 s", "cpu_s": 0.5}
    result = plan_result("5", TRAIN, Path("l"), {"JobState": "FAILED"}, own, None, None)
    assert (result.killed_reason, result.returncode) == (
        "Slurm job 5 exceeded its time limit of 3 s",
        -15,
    )


def test_slurms_accounting_wins_over_the_jobs_own_figures_for_time_and_cpu():
    usage = {"returncode": 0, "elapsed_s": 9.0, "cpu_s": 8.0, "peak_rss_bytes": 100}
    accounting = {"elapsed_s": 10.0, "cpu_s": 19.0, "peak_rss_bytes": 200}
    info = {"JobState": "COMPLETED", "ExitCode": "0:0"}
    result = plan_result("6", TRAIN, Path("l"), info, usage, accounting, None)
    assert (result.elapsed_s, result.cpu_s, result.peak_rss_bytes) == (10.0, 19.0, 200)
    assert result.ok and result.killed_reason is None and result.enforcement == "slurm"


def test_a_pending_job_that_can_never_start_is_named_with_its_cause():
    info = {"Partition": "debug"}
    assert plan_never_starts("8", "Resources", TRAIN, info) is None
    assert plan_never_starts("8", "PartitionConfig", TRAIN, info) == (
        "Slurm job 8 can never start: no node of partition 'debug' is large enough "
        "for it (2 CPUs, 4.0 GiB) (PartitionConfig); it was cancelled"
    )
    assert "account or QOS" in str(plan_never_starts("8", "QOSMaxCpuPerJobLimit", TRAIN, info))


def test_the_default_backend_comes_from_the_environment(monkeypatch):
    assert backend_name(None, {}) == "local"
    assert backend_name(None, {"COURSEHUB_RUNNER_BACKEND": "slurm"}) == "slurm"
    assert backend_name("local", {"COURSEHUB_RUNNER_BACKEND": "slurm"}) == "local"
    with pytest.raises(UsageError, match="COURSEHUB_RUNNER_BACKEND"):
        backend_name(None, {"COURSEHUB_RUNNER_BACKEND": "pbs"})
    monkeypatch.setenv("COURSEHUB_RUNNER_BACKEND", "slurm")
    monkeypatch.setenv("COURSEHUB_SLURM_PARTITION", "gpu")
    backend = make_backend(qos="course")
    assert isinstance(backend, SlurmBackend)
    assert backend.placement == SlurmPlacement("gpu", None, "course")
    assert isinstance(make_backend("local"), LocalBackend)


def test_a_partition_given_to_the_local_backend_is_a_usage_error():
    with pytest.raises(UsageError, match="--partition only apply to --backend slurm"):
        make_backend("local", partition="gpu")


def test_job_ids_choose_the_backend_and_an_unknown_local_job_is_named(tmp_path):
    assert is_slurm_job_id("123") and is_slurm_job_id("123_4")
    assert not is_slurm_job_id("20250101-120000-train-1a2b3c")
    with pytest.raises(UsageError, match="no job 20250101-x in"):
        job_status("20250101-x", tmp_path)
