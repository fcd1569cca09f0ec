"""nbgrader end to end, for real: release, fetch, submit, collect, autograde in runner jobs, export.

Students are simulated with a working folder each and an explicit student
id: the tests run as one Unix user, and nbgrader's exchange names a
submission after ``CourseDirectory.student_id`` when it is set (else after
the Unix user), so each fetch and submit passes its student's id.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest

from coursehub.errors import CoursehubError
from coursehub.grading.assignments import (
    add_assignment,
    assignment_status,
    collect,
    generate_assignment,
    generate_feedback,
    release_assignment,
    release_feedback,
)
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.autograde.outcomes import load_outcomes
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir, setup_demo_grading
from coursehub.grading.exchange import fetch_assignment, fetch_feedback, submit_assignment
from coursehub.grading.export import CSV_COLUMNS, export_grades_csv, read_grade_table
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool

pytestmark = pytest.mark.slow

PS = "ps1"
CORRECT = (
    "    a, b, c = (M1 + M2) * L1**2, M2 * L2**2, M2 * L1 * L2\n"
    "    kinetic = a * omega1**2 / 2 + b * omega2**2 / 2"
    " + c * omega1 * omega2 * np.cos(theta1 - theta2)\n"
    "    return kinetic - (M1 + M2) * G * L1 * np.cos(theta1) - M2 * G * L2 * np.cos(theta2)"
)
#: What each student writes in place of ``raise NotImplementedError()``.
ANSWERS = {
    "alice": CORRECT,
    "bob": "    return 0.0 * theta1",
    "carol": CORRECT,
}
#: Put before the solution cell's code: a loop that never ends (the function is never defined).
LOOP = "while True:  # never ends\n    pass\n\n"


def new_course(tmp_path: Path, course_id: str, **options: object) -> CourseLayout:
    layout = make_layout(
        course_id, tmp_path / "courses", tmp_path / "exchange", single_user=True, **options
    )
    ensure_course(layout)
    add_assignment(layout, PS, [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
    generate_assignment(layout, PS)
    release_assignment(layout, PS)
    return layout


def answer(layout: CourseLayout, tmp_path: Path, student: str, body: str | None) -> None:
    """Fetch as ``student`` from their own folder, write ``body`` (None: garbage), submit."""
    answer_assignment(
        layout, tmp_path, PS, student, body, before=LOOP if student == "carol" else ""
    )


def answer_assignment(
    layout: CourseLayout,
    root: Path,
    assignment: str,
    student: str,
    body: str | None,
    before: str = "",
) -> None:
    """Fetch ``assignment`` (the demo notebook) as ``student`` into ``root/home/<student>``,
    write ``body`` in its answer cell (``before`` ahead of the cell's code; None: a
    notebook that is not JSON), submit."""
    home = root / "home" / student
    folder = fetch_assignment(layout.exchange_root, layout.course_id, assignment, student, home)
    path = folder / f"{DEMO_ASSIGNMENT}.ipynb"
    if body is None:
        path.write_text('{"cells": [ this is not json')
    else:
        notebook = nbformat.read(path, as_version=4)
        cell = next(c for c in notebook.cells if c.metadata["nbgrader"]["grade_id"] == "energy")
        cell.source = before + cell.source.replace(
            "    # YOUR CODE HERE\n    raise NotImplementedError()", body
        )
        nbformat.write(notebook, path)
    submit_assignment(layout.exchange_root, layout.course_id, assignment, student, home)


def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False, grace_s=1.0
    )


def test_assignment_lifecycle_grades_every_submission(tmp_path):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=15)
    for student, body in ANSWERS.items():
        answer(layout, tmp_path, student, body)
    answer(layout, tmp_path, "dan", None)  # corrupt notebook
    answer(layout, tmp_path, "eve", CORRECT)  # not on the roster
    status = assignment_status(layout, PS)
    assert status.released and status.fetched == ("alice", "bob", "carol", "dan", "eve")
    assert status.submitted == status.fetched and status.collected == ()
    collect(layout, PS)
    assert assignment_status(layout, PS).collected == ("alice", "bob", "carol", "dan", "eve")

    roster = ["alice", "bob", "carol", "dan"]
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=120)
    outcomes = {
        o.student_id: o for o in autograde_assignment(layout, PS, roster, limits, backend(tmp_path))
    }
    assert {s: (o.status, o.score) for s, o in outcomes.items()} == {
        "alice": ("graded", 4.0),
        "bob": ("graded", 0.0),
        "carol": ("timeout", 0.0),
        "dan": ("corrupt", 0.0),
        "eve": ("not-on-roster", None),
    }
    assert "interrupted after 15 s" in outcomes["carol"].message
    assert "student dan: pendulum_energy.ipynb is not a valid notebook" in outcomes["dan"].message
    assert "eve is not on the roster" in outcomes["eve"].message
    assert load_outcomes(layout, PS) == sorted(outcomes.values(), key=lambda o: o.student_id)
    assert assignment_status(layout, PS).autograded == ("alice", "bob", "carol")

    generate_feedback(layout, PS)
    release_feedback(layout, PS)
    assert len(list((layout.exchange_root / "phys-2025" / "feedback").iterdir())) == 3

    with export_grades_csv(layout, tmp_path / "grades.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert {r["student_id"]: float(r["score"]) for r in rows} == {
        "alice": 4.0,
        "bob": 0.0,
        "carol": 0.0,
        "dan": 0.0,
    }
    assert {r["max_score"] for r in rows} == {"4.0"}
    table = read_grade_table(layout)
    assert table.assignments == (PS,) and [r.total for r in table.rows] == [4.0, 0.0, 0.0, 0.0]


def test_runner_stops_a_job_that_outlives_its_wall_clock(tmp_path):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=600)
    answer(layout, tmp_path, "carol", ANSWERS["carol"])
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=5)
    [outcome] = autograde_assignment(layout, PS, ["carol"], limits, backend(tmp_path))
    assert (outcome.status, outcome.score) == ("killed", 0.0)
    assert "student carol: stopped:" in outcome.message
    assert {r.student_id: r.total for r in read_grade_table(layout).rows} == {"carol": 0.0}


def test_teacher_of_two_courses_keeps_them_apart(tmp_path):
    meca = new_course(tmp_path, "mlmeca-2025")
    flu = new_course(tmp_path, "numflu-2025")
    answer(meca, tmp_path, "alice", CORRECT)
    answer(flu, tmp_path, "bob", "    return 0.0")
    collect(meca, PS)
    collect(flu, PS)
    assert assignment_status(meca, PS).collected == ("alice",)
    assert assignment_status(flu, PS).collected == ("bob",)
    assert (tmp_path / "home" / "alice" / "mlmeca-2025" / PS).is_dir()
    assert not (tmp_path / "home" / "alice" / "numflu-2025").exists()
    assert meca.db_url != flu.db_url


def test_fetch_and_submit_errors_name_the_student_and_assignment(tmp_path):
    layout = new_course(tmp_path, "phys-2025")
    with pytest.raises(CoursehubError, match="fetch of assignment ps9 of course phys-2025 by ana"):
        fetch_assignment(layout.exchange_root, "phys-2025", "ps9", "ana", tmp_path / "ana")
    with pytest.raises(CoursehubError, match="submit of assignment ps1 of course phys-2025 by ana"):
        submit_assignment(layout.exchange_root, "phys-2025", PS, "ana", tmp_path / "ana")


def test_demo_course_gets_its_released_assignment_once(session, tmp_path):
    from coursehub.catalog.seed import seed_demo

    course = seed_demo(session)
    layout = setup_demo_grading(
        session, course.course_id, tmp_path / "c", tmp_path / "x", tmp_path / "jupyter"
    )
    assert "JUPYTERHUB_USER" in (tmp_path / "jupyter" / "nbgrader_config.py").read_text()
    outbound = tmp_path / "x" / course.course_id / "outbound" / DEMO_ASSIGNMENT
    assert (outbound / f"{DEMO_ASSIGNMENT}.ipynb").is_file()
    before = (outbound / f"{DEMO_ASSIGNMENT}.ipynb").stat().st_mtime_ns
    assert setup_demo_grading(session, course.course_id, tmp_path / "c", tmp_path / "x") == layout
    assert (outbound / f"{DEMO_ASSIGNMENT}.ipynb").stat().st_mtime_ns == before
    assert len(read_grade_table(layout).rows) == 4  # the seeded students


def test_a_job_the_runner_refuses_is_reported_not_raised(tmp_path):
    layout = new_course(tmp_path, "phys-2025")
    answer(layout, tmp_path, "alice", CORRECT)
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=64, timeout_s=60)  # more than the 1-CPU budget
    [outcome] = autograde_assignment(layout, PS, ["alice"], limits, backend(tmp_path))
    assert (outcome.status, outcome.score) == ("failed", 0.0)
    assert "student alice: not run: 64 threads" in outcome.message


def fix_submission(layout: CourseLayout, student: str, body: str) -> Path:
    """Write ``body`` in the collected notebook of ``student``, as a teacher would; return it."""
    path = layout.course_dir / "submitted" / student / PS / f"{DEMO_ASSIGNMENT}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.metadata["nbgrader"]["grade_id"] == "energy")
    cell.source = cell.source.replace(ANSWERS[student], body)
    assert cell.source != ANSWERS[student]
    nbformat.write(notebook, path)
    return path


def regrade_and_fetch_feedback(layout: CourseLayout, tmp_path: Path, student: str) -> str:
    """Autograde again (force), generate and release feedback; return the student's HTML."""
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=120)
    [outcome] = autograde_assignment(layout, PS, [student], limits, backend(tmp_path), force=True)
    assert (outcome.status, outcome.score) == ("graded", 4.0), outcome.message
    generate_feedback(layout, PS)
    release_feedback(layout, PS)
    home = tmp_path / "home" / student
    [html] = fetch_feedback(layout.exchange_root, layout.course_id, PS, student, home)
    return html.read_text()


@pytest.mark.parametrize("replaced", [False, True], ids=["edited", "folder-replaced"])
def test_a_student_gets_the_feedback_of_a_submission_the_teacher_fixed(tmp_path, replaced):
    # jupyter/nbgrader#1712: the teacher fixes a collected notebook, grades it again
    layout = new_course(tmp_path, "phys-2025")
    answer(layout, tmp_path, "bob", ANSWERS["bob"])
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=120)
    [first] = autograde_assignment(layout, PS, ["bob"], limits, backend(tmp_path))
    assert first.score == 0.0
    fixed = fix_submission(layout, "bob", CORRECT)
    if replaced:  # the teacher's own folder: the notebook only, no secret nor timestamp
        folder = fixed.parent
        text = fixed.read_text()
        shutil.rmtree(folder)
        folder.mkdir()
        fixed.write_text(text)
    html = regrade_and_fetch_feedback(layout, tmp_path, "bob")
    assert "4.0 / 4.0" in html
    # the submission keeps its own time (the late penalty) and secret (the feedback's name)
    for name in ("timestamp.txt", "submission_secret.txt"):
        assert (fixed.parent / name).is_file()
