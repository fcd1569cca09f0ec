"""Parallel autograding, the pure parts: jobs at once, what to grade again, progress record."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coursehub.errors import UsageError
from coursehub.grading.autograde.launch import plan_autograde_command
from coursehub.grading.autograde.outcomes import SubmissionOutcome
from coursehub.grading.autograde.plan import backend_capacity, plan_parallel, plan_pending
from coursehub.grading.autograde.progress import (
    AutogradeFailure,
    AutogradeProgress,
    estimate_time_left,
    parse_progress_json,
    read_autograde_progress,
    render_progress_json,
    write_progress,
)
from coursehub.grading.layout import make_layout
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool


@pytest.mark.parametrize(
    ("requested", "capacity", "pending", "expected"),
    [
        (None, 2, 60, 2),  # default: all that fit
        (None, 8, 60, 8),
        (4, 2, 60, 2),  # never more than the slots hold
        (1, 2, 60, 1),  # serial
        (3, None, 60, 3),  # a backend with no known limit
        (None, None, 60, 1),
        (None, 16, 5, 5),  # no more workers than submissions
        (None, 2, 0, 1),
    ],
)
def test_the_number_of_jobs_at_once_is_what_fits_unless_asked_for_fewer(
    requested, capacity, pending, expected
):
    assert plan_parallel(requested, capacity, pending) == expected


def test_zero_jobs_at_once_is_refused_with_the_option_named():
    with pytest.raises(UsageError, match="--parallel must be at least 1, got 0"):
        plan_parallel(0, 2, 10)


def test_the_local_backends_capacity_is_its_cpu_budget_over_the_courses_threads(tmp_path):
    backend = LocalBackend(tmp_path / "runs", SlotPool(tmp_path / "slots", 16))
    assert [backend_capacity(backend, n) for n in (1, 2, 3, 16)] == [16, 8, 5, 1]


def outcome(student: str, status: str, stamp: str = "2025-03-01 10:00:00") -> SubmissionOutcome:
    return SubmissionOutcome(student, status, 0.0, 4.0, status, stamp)


STAMP = {"ana": "2025-03-01 10:00:00"}


@pytest.mark.parametrize(
    ("previous", "stamps", "autograded", "force", "kept"),
    [
        ([outcome("ana", "graded")], STAMP, ["ana"], False, True),
        ([outcome("ana", "timeout")], STAMP, ["ana"], False, True),
        ([outcome("ana", "killed")], STAMP, [], False, True),
        ([outcome("ana", "corrupt")], STAMP, [], False, True),
        ([outcome("ana", "graded")], STAMP, ["ana"], True, False),  # --force
        ([outcome("ana", "failed")], STAMP, ["ana"], False, False),  # perhaps the host's fault
        ([outcome("ana", "graded")], {"ana": "2025-03-02 09:00:00"}, ["ana"], False, False),
        ([outcome("ana", "graded")], STAMP, [], False, False),  # autograded/ was removed
        ([outcome("ana", "graded", stamp="")], {"ana": ""}, ["ana"], False, False),
        ([], STAMP, [], False, False),  # interrupted before it was done
    ],
)
def test_a_submission_is_graded_again_only_when_forced_resubmitted_failed_or_unfinished(
    previous, stamps, autograded, force, kept
):
    plan = plan_pending(["ana"], {o.student_id: o for o in previous}, stamps, autograded, force)
    assert plan.kept == (tuple(previous) if kept else ())
    assert plan.to_grade == (() if kept else ("ana",))


@pytest.mark.parametrize(
    ("elapsed", "done", "remaining", "expected"),
    [(60.0, 10, 20, 120.0), (10.0, 0, 5, None), (0.0, 3, 5, None), (30.0, 3, 0, 0.0)],
)
def test_the_time_left_follows_the_pace_of_this_run(elapsed, done, remaining, expected):
    assert estimate_time_left(elapsed, done, remaining) == expected


def test_the_progress_record_reads_back_as_written():
    progress = AutogradeProgress(
        "phys-2025",
        "ps1",
        "running",
        graded=3,
        total=60,
        skipped=1,
        failures=(AutogradeFailure("carol", "killed", "stopped: wall clock 600 s"),),
        running_now=("dan", "erin"),
        parallel=2,
        started_at=1.0,
        updated_at=2.0,
        estimated_s_left=95.5,
        pid=1234,
    )
    assert parse_progress_json(render_progress_json(progress), "phys-2025", "ps1") == progress


def test_an_unreadable_progress_record_reads_as_not_started_and_says_so():
    progress = parse_progress_json('{"state": "runn', "phys-2025", "ps1")
    assert (progress.state, progress.message) == ("not-started", "progress record unreadable")


def test_an_assignment_never_autograded_has_not_started(tmp_path):
    layout = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange")
    progress = read_autograde_progress(layout, "ps1")
    assert (progress.state, progress.graded, progress.total) == ("not-started", 0, 0)


def test_a_running_record_whose_process_is_gone_reads_as_interrupted(tmp_path):
    layout = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    write_progress(layout, AutogradeProgress("phys-2025", "ps1", "running", 2, 5, pid=gone.pid))
    (layout.reports_dir / "autograde-ps1.log").write_text("coursehub: error: no course x\n\n")
    progress = read_autograde_progress(layout, "ps1")
    assert progress.state == "interrupted" and not progress.is_running
    assert f"(pid {gone.pid}) stopped after 2 of 5" in progress.message
    assert "its last words: coursehub: error: no course x" in progress.message


def test_a_running_record_of_a_live_process_reads_as_running(tmp_path):
    layout = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange")
    write_progress(layout, AutogradeProgress("phys-2025", "ps1", "running", 2, 5, pid=1))
    assert read_autograde_progress(layout, "ps1").is_running


def test_the_background_command_is_the_cli_with_its_options():
    assert plan_autograde_command("phys-2025", "ps1", 4, True, python="py") == [
        *("py", "-m", "coursehub", "grading", "autograde", "phys-2025", "ps1"),
        *("--parallel", "4", "--force"),
    ]
    assert plan_autograde_command("c", "a", python="py")[-2:] == ["c", "a"]


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_the_cli_refuses_a_parallel_count_that_is_not_a_positive_whole_number(value):
    done = subprocess.run(
        [sys.executable, "-m", "coursehub", "grading", "autograde", "c", "a", "--parallel", value],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert f"expected a whole number >= 1, got '{value}'" in done.stderr
