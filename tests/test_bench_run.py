"""``coursehub bench contention`` end to end (tiny runs) and its bad-input handling."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from coursehub.bench.contention import ensure_dataset, run_scenario, weighted_cgroup
from coursehub.bench.scenarios import Scenario
from coursehub.bench.students import BenchSettings
from coursehub.bench.workload import main as workload_main
from coursehub.cli import main
from coursehub.resources.cgroups import CgroupUnavailableError, job_cgroup_bases
from coursehub.resources.cpus import affinity_cpus


def cgroups_usable() -> bool:
    """True where the benchmark can give each student a quota cgroup (root, writable fs)."""
    if os.geteuid() != 0:
        return False
    try:
        job_cgroup_bases()
    except CgroupUnavailableError:
        return False
    return True


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["--users", "0"], "--users must be"),
        (["--users", "1,x"], "--users must be"),
        (["--cpu-limit", "-1"], "--cpu-limit must be a positive number"),
        (["--cpu-limit", "lots"], "--cpu-limit must be a number"),
        (["--cpu-limit", "3", "--cpu-budget", "2"], "more than the CPU budget of 2"),
        (["--modes", "naive,turbo"], "unknown mode 'turbo'"),
        (["--steps", "0"], "--steps must be an integer >= 1"),
        (["--timeout", "soon"], "duration must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, expect, capsys, tmp_path):
    status = main(["bench", "contention", "--work-dir", str(tmp_path / "work"), *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("coursehub: error: ") and expect in err
    assert err.count("\n") == 1
    assert not (tmp_path / "work").exists()


def test_unwritable_json_folder_is_refused_before_running(capsys, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    status = main(["bench", "contention", "--json", str(blocker / "out.json")])
    assert status == 2
    assert "is not writable" in capsys.readouterr().err


def test_workload_rejects_bad_steps(tmp_path, capsys):
    assert workload_main(["--data", str(tmp_path / "none.npz"), "--steps", "0"]) == 2
    assert "--steps and --batch-size must be >= 1" in capsys.readouterr().err


def test_tiny_run_writes_table_json_and_plot(tmp_path, capsys):
    out_json, out_png = tmp_path / "out" / "bench.json", tmp_path / "out" / "bench.png"
    status = main(
        [
            "bench",
            "contention",
            "--users",
            "1",
            "--steps",
            "2",
            "--modes",
            "managed",
            "--repeat",
            "2",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
            "--no-progress",
            "--no-gpu",
            "--work-dir",
            str(tmp_path / "work"),
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "students  mode" in printed
    assert "GPU check: not asked for" in printed
    document = json.loads(out_json.read_text())
    [row] = document["rows"]
    assert (row["mode"], row["n_students"]) == ("managed", 1)
    assert row["slowdown"] == pytest.approx(1.0)  # the baseline against itself
    assert len(row["summary"]["ratios"]) == 2 and row["summary"]["baseline"]["n"] == 2
    assert "95% interval" in printed and "baseline: 2 alone runs" in printed
    assert row["torch_threads"] == 1
    assert len(document["scenarios"]) == 2  # the baseline, twice
    [student] = document["scenarios"][0]["students"]
    assert student["returncode"] == 0 and student["train_s"] > 0
    assert student["enforcement"].startswith("cgroup" if cgroups_usable() else "none")
    assert document["settings"]["steps"] == 2
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out_json.parent.glob(".*.tmp"))


@pytest.mark.slow
def test_naive_student_gets_torch_default_threads_despite_caller_settings(tmp_path, monkeypatch):
    # Thread settings of the caller: a naive student must not inherit them.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    data = ensure_dataset(tmp_path / "data.npz")
    settings = BenchSettings((), steps=2, cpu_budget=2, timeout_s=300)
    result = run_scenario(Scenario("naive", 1, 1.0, None), data, settings, tmp_path)
    [student] = result.students
    assert student.returncode == 0 and student.train_s is not None
    assert student.torch_threads is not None
    assert student.torch_threads >= min(2, affinity_cpus())
    assert student.enforcement.startswith("cgroup" if cgroups_usable() else "none")
    assert student.quota_applied == cgroups_usable()


@pytest.mark.root
def test_weighted_cgroup_is_held_for_the_run_then_removed():
    if not cgroups_usable():
        pytest.skip("needs root and a writable cgroup filesystem")
    version, cpu_base, _ = job_cgroup_bases()
    name = f"coursehub-test-{uuid.uuid4().hex[:8]}"
    directory = cpu_base / name
    with weighted_cgroup(name, 4096) as note:
        assert note is None
        assert (directory / "hold").is_dir()
        weight_file, value = ("cpu.shares", "4096") if version == 1 else ("cpu.weight", "157")
        assert (directory / weight_file).read_text().strip() == value
    assert not directory.exists()
