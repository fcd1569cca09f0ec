"""Parallel autograding for real: nbgrader in runner jobs, two CPU slots, the demo assignment.

Students are simulated as in ``test_grading_e2e`` (a folder each, an explicit
student id). Each job is a fresh interpreter and kernel (several seconds).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from coursehub.grading.assignments import collect
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.autograde.lock import AutogradeRunningError
from coursehub.grading.autograde.outcomes import load_outcomes
from coursehub.grading.autograde.progress import read_autograde_progress
from coursehub.grading.demo import DEMO_ASSIGNMENT
from coursehub.grading.export import read_grade_table
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from helpers import wait_until
from test_grading_e2e import CORRECT, PS, answer, new_course

pytestmark = pytest.mark.slow

#: A cell that fills memory (bytes written, so that they count in the resident set).
HOG = "hog = b'x' * (3 * 2**30)\n"
LIMITS = AutogradeLimits(n_threads=1, mem_limit=2**30, timeout_s=45)


def two_slot_backend(tmp_path):
    return LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 2), use_cgroups=False, grace_s=1.0
    )


def scores(outcomes):
    return {o.student_id: (o.status, o.score) for o in outcomes}


def autograded_mtimes(layout, students):
    folder = layout.course_dir / "autograded"
    return {s: (folder / s / PS / f"{DEMO_ASSIGNMENT}.ipynb").stat().st_mtime_ns for s in students}


def test_the_parallel_run_gives_the_serial_scores_and_force_regrades_them(tmp_path):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=30)
    answer(layout, tmp_path, "alice", CORRECT)
    answer(layout, tmp_path, "bob", "    return 0.0 * theta1")
    answer(layout, tmp_path, "dan", None)  # corrupt notebook
    answer(layout, tmp_path, "erin", CORRECT)
    answer(layout, tmp_path, "eve", CORRECT)  # not on the roster
    collect(layout, PS)
    roster = ["alice", "bob", "dan", "erin"]
    backend = two_slot_backend(tmp_path)
    serial = autograde_assignment(layout, PS, roster, LIMITS, backend, parallel=1)
    serial_table = read_grade_table(layout)
    before = autograded_mtimes(layout, ["alice", "bob", "erin"])
    seen = []
    side = autograde_assignment(
        layout, PS, roster, LIMITS, backend, parallel=2, force=True, on_progress=seen.append
    )
    assert (
        scores(side)
        == scores(serial)
        == {
            "alice": ("graded", 4.0),
            "bob": ("graded", 0.0),
            "dan": ("corrupt", 0.0),
            "erin": ("graded", 4.0),
            "eve": ("not-on-roster", None),
        }
    )
    assert read_grade_table(layout) == serial_table
    after = autograded_mtimes(layout, ["alice", "bob", "erin"])
    assert all(after[s] > before[s] for s in before)  # --force graded them again
    assert max(len(p.running_now) for p in seen) == 2  # two jobs were running at once
    assert (seen[-1].state, seen[-1].graded, seen[-1].total, seen[-1].skipped) == ("done", 4, 4, 0)

    again = autograde_assignment(layout, PS, roster, LIMITS, backend)  # no --force
    assert scores(again) == scores(serial)
    assert autograded_mtimes(layout, ["alice", "bob", "erin"]) == after  # nothing regraded
    progress = read_autograde_progress(layout, PS)
    assert (progress.state, progress.graded, progress.skipped) == ("done", 4, 4)


def test_a_looping_or_memory_hungry_submission_holds_only_its_own_slot(tmp_path):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=600)  # the runner must stop it
    answer(layout, tmp_path, "aaron", "    while True:  # never ends\n        pass")
    answer(layout, tmp_path, "alice", CORRECT)
    answer(layout, tmp_path, "bob", "    return 0.0 * theta1")
    answer(layout, tmp_path, "mallory", textwrap.indent(HOG, "    ") + CORRECT)
    collect(layout, PS)
    roster = ["aaron", "alice", "bob", "mallory"]
    # the endless loop spins a CPU until this limit, which must outlast the three others
    # graded one after another in the other slot: 34 s on 2 cores at a load of 10
    limits = AutogradeLimits(n_threads=1, mem_limit=2**30, timeout_s=75)
    seen = []
    outcomes = {
        o.student_id: o
        for o in autograde_assignment(
            layout, PS, roster, limits, two_slot_backend(tmp_path), on_progress=seen.append
        )
    }
    assert scores(outcomes.values()) == {
        "aaron": ("killed", 0.0),
        "alice": ("graded", 4.0),
        "bob": ("graded", 0.0),
        "mallory": ("killed", 0.0),
    }
    assert "student aaron: stopped:" in outcomes["aaron"].message
    assert "memory" in outcomes["mallory"].message
    # the endless loop, started first, held one slot; the other slot graded everyone else
    assert any(p.graded == 3 and p.running_now == ("aaron",) for p in seen)
    failures = {f.student_id: f.status for f in read_autograde_progress(layout, PS).failures}
    assert failures == {"aaron": "killed", "mallory": "killed"}


GRADE_IN_CHILD = """\
import sys
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.layout import make_layout
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
root, exchange, tmp = sys.argv[1:4]
layout = make_layout("phys-2025", root, exchange, single_user=True, execute_timeout_s=30)
backend = LocalBackend(tmp + "/runs", SlotPool(tmp + "/slots", 2), use_cgroups=False)
limits = AutogradeLimits(n_threads=1, mem_limit=2**30, timeout_s=120)
autograde_assignment(layout, "ps1", ["alice", "bob", "erin"], limits, backend, parallel=1)
"""


def test_an_interrupted_autograde_continues_where_it_stopped_and_none_runs_twice(tmp_path):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=30)
    for student in ("alice", "bob", "erin"):
        answer(layout, tmp_path, student, CORRECT)
    collect(layout, PS)
    root, exchange = str(layout.course_dir.parent), str(layout.exchange_root)
    child = subprocess.Popen(
        [sys.executable, "-c", GRADE_IN_CHILD, root, exchange, str(tmp_path)],
        start_new_session=True,
    )
    try:
        wait_until(lambda: read_autograde_progress(layout, PS).graded >= 1, timeout_s=180)
        with pytest.raises(AutogradeRunningError, match=f"pid {child.pid}"):
            autograde_assignment(layout, PS, ["alice"], LIMITS, two_slot_backend(tmp_path))
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # as a crash or a reboot would
        child.wait()
    progress = read_autograde_progress(layout, PS)
    assert progress.state == "interrupted" and progress.graded in (1, 2)
    done_before = [o.student_id for o in load_outcomes(layout, PS)]
    assert done_before and len(done_before) == progress.graded
    kept = autograded_mtimes(layout, done_before)

    roster = ["alice", "bob", "erin"]
    outcomes = autograde_assignment(layout, PS, roster, LIMITS, two_slot_backend(tmp_path))
    assert scores(outcomes) == {s: ("graded", 4.0) for s in roster}
    assert autograded_mtimes(layout, done_before) == kept  # not graded twice
    progress = read_autograde_progress(layout, PS)
    assert (progress.state, progress.graded, progress.skipped) == ("done", 3, len(done_before))
