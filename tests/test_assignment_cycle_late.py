"""Late submissions are penalised as the assignment's policy says, by nbgrader's own late step.

Real nbgrader, real runner jobs: each student fetches and submits; the
submission's ``timestamp.txt`` is then rewritten to a chosen time, in the
format nbgrader's submit records (``nbgrader.utils.get_timestamp``), before
collect; autograde asks the course's plugin for the penalty.
"""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coursehub.grading.assignments import collect, generate_assignment, release_assignment
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.create import NewAssignment, create_assignment, parse_duedate, set_schedule
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.export import GRADED, read_grade_table, render_grades_csv
from coursehub.grading.latepolicy import LatePolicy
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from test_grading_e2e import CORRECT, answer_assignment

pytestmark = pytest.mark.slow

#: 18:00 in Paris on 1 March 2025 (UTC+1) is 17:00 UTC.
DUE = parse_duedate("2025-03-01T18:00", "Europe/Paris")


def submit_at(layout: CourseLayout, tmp_path: Path, ps: str, student: str, when: datetime) -> None:
    """Fetch, answer correctly, submit as ``student``; record the submission as made at ``when``."""
    answer_assignment(layout, tmp_path, ps, student, CORRECT)
    inbound = layout.exchange_root / layout.course_id / "inbound"
    [submission] = inbound.glob(f"{student}+{ps}+*")
    stamp = when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f %Z")  # nbgrader's get_timestamp
    (submission / "timestamp.txt").write_text(stamp)


def new_assignment(layout: CourseLayout, ps: str, policy: LatePolicy) -> None:
    source = demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"
    create_assignment(layout, NewAssignment(ps, DUE, policy), source.name, source.read_bytes())
    generate_assignment(layout, ps)
    release_assignment(layout, ps)


def test_late_submissions_are_penalised_as_each_assignment_says(tmp_path):
    layout = make_layout("late-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(layout)
    assert datetime(2025, 3, 1, 17, 0, tzinfo=UTC) == DUE
    new_assignment(layout, "ps1", LatePolicy("per_hour", 1.0))
    new_assignment(layout, "ps2", LatePolicy("zero"))
    times = {
        "alice": datetime(2025, 3, 1, 16, 30, tzinfo=UTC),  # on time
        "bob": datetime(2025, 3, 1, 19, 0, tzinfo=UTC),  # 2 h late
        "carol": datetime(2025, 3, 2, 23, 0, tzinfo=UTC),  # 30 h late
    }
    for student, when in times.items():
        submit_at(layout, tmp_path, "ps1", student, when)
    submit_at(layout, tmp_path, "ps2", "bob", times["bob"])
    backend = LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False, grace_s=1.0
    )
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=180)
    for ps in ("ps1", "ps2"):
        collect(layout, ps)
        outcomes = autograde_assignment(layout, ps, list(times), limits, backend)
        assert {o.status for o in outcomes} == {"graded"}, outcomes

    table = read_grade_table(layout)
    cells = {row.student_id: row.cells for row in table.rows}
    # per hour: 1 point per hour late; 30 points is more than the score: nbgrader clamps it
    assert [(c.state, c.score, c.penalty) for c in (cells[s][0] for s in times)] == [
        (GRADED, 4.0, 0.0),
        (GRADED, 2.0, 2.0),
        (GRADED, 0.0, 4.0),
    ]
    assert (cells["bob"][1].score, cells["bob"][1].penalty) == (0.0, 4.0)  # zero: all of it
    rows = list(csv.DictReader(render_grades_csv(layout).splitlines()))
    bob = {r["assignment"]: r for r in rows if r["student_id"] == "bob"}
    assert (bob["ps1"]["raw_score"], bob["ps1"]["late_submission_penalty"]) == ("4.0", "2.0")
    assert bob["ps1"]["score"] == "2.0" and bob["ps2"]["score"] == "0.0"


def test_moving_the_due_date_recomputes_the_penalties_already_given(tmp_path):
    layout = make_layout("move-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(layout)
    policy = LatePolicy("per_hour", 1.0)
    new_assignment(layout, "ps1", policy)
    submit_at(layout, tmp_path, "ps1", "bob", datetime(2025, 3, 1, 19, 0, tzinfo=UTC))  # 2 h late
    backend = LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False, grace_s=1.0
    )
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=180)
    collect(layout, "ps1")
    assert {o.status for o in autograde_assignment(layout, "ps1", ["bob"], limits, backend)} == {
        "graded"
    }

    def bob() -> tuple[float | None, float | None]:
        [row] = [r for r in read_grade_table(layout).rows if r.student_id == "bob"]
        return row.cells[0].score, row.cells[0].penalty

    assert bob() == (2.0, 2.0)
    later = parse_duedate("2025-03-01T21:00", "Europe/Paris")  # 20:00 UTC: on time now
    [change] = set_schedule(layout, "ps1", later, policy, "Europe/Paris")
    assert (change.student_id, change.before, change.after) == ("bob", 2.0, 0.0)
    assert bob() == (4.0, 0.0)
    earlier = parse_duedate("2025-03-01T17:00", "Europe/Paris")  # 16:00 UTC: 3 h late
    set_schedule(layout, "ps1", earlier, policy, "Europe/Paris")
    assert bob() == (1.0, 3.0)
    set_schedule(layout, "ps1", earlier, LatePolicy("zero"), "Europe/Paris")  # another policy
    assert bob() == (0.0, 4.0)
    assert set_schedule(layout, "ps1", None, LatePolicy("zero"), "Europe/Paris")[0].after == 0.0
