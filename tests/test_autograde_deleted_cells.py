"""Real nbgrader autograde of submissions whose test cells were deleted or edited (nbgrader#1682).

The 6-point assignment: ``test_add`` (2 points) after the solution cell
``add``, a locked markdown cell, then ``test_add_hidden`` (3 points, hidden
tests), ``count`` and ``test_count`` (1 point). Every student answers
correctly; then one deletes ``test_add``, one deletes ``test_add_hidden``
(right after a locked markdown cell: nbgrader's own ``add_missing_cells``
fails there), one strips its nbgrader metadata, one edits ``test_count``.
Each scores 6/6 against the source's cells, no grade is left waiting for a
manual grade, and the outcome names what was changed.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    release_assignment,
)
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.exchange import fetch_assignment, submit_assignment
from coursehub.grading.layout import ensure_course, make_layout
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool

pytestmark = pytest.mark.slow

PS = "ps1"
LIMITS = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=240)


def meta(grade_id: str, solution: bool = False, points: int = 0) -> dict:
    nbg = {"grade_id": grade_id, "solution": solution, "grade": points > 0, "locked": not solution}
    return {"nbgrader": {**nbg, "schema_version": 3, **({"points": points} if points else {})}}


def source_notebook(path: Path) -> Path:
    cells = [
        new_markdown_cell("Write `add(a, b)` and `count(n)`.", metadata=meta("intro")),
        new_code_cell(
            "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION",
            metadata=meta("add", solution=True),
        ),
        new_code_cell("assert add(1, 2) == 3", metadata=meta("test_add", points=2)),
        new_markdown_cell("More tests of `add`.", metadata=meta("more")),
        new_code_cell(
            "assert add(2, 2) == 4\n### BEGIN HIDDEN TESTS\nassert add(-1, 1) == 0\n"
            "### END HIDDEN TESTS",
            metadata=meta("test_add_hidden", points=3),
        ),
        new_code_cell(
            "def count(n):\n    ### BEGIN SOLUTION\n    return len(range(n))\n    ### END SOLUTION",
            metadata=meta("count", solution=True),
        ),
        new_code_cell("assert count(3) == 3", metadata=meta("test_count", points=1)),
    ]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), path)
    return path


def grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def tamper(cells: list, how: str) -> list:
    if how.startswith("delete "):
        return [c for c in cells if grade_id(c) != how.removeprefix("delete ")]
    for cell in cells:
        if how == "strip test_add_hidden" and grade_id(cell) == "test_add_hidden":
            del cell.metadata["nbgrader"]
            cell.source = "pass"
        elif how == "edit test_count" and grade_id(cell) == "test_count":
            cell.source = "pass"
    return cells


TAMPERING = {
    "p1": "",
    "p2": "delete test_add",
    "p3": "delete test_add_hidden",
    "p4": "strip test_add_hidden",
    "p5": "edit test_count",
}


def test_deleted_or_edited_test_cells_are_graded_from_the_source_and_named(tmp_path):
    from nbgrader.api import Gradebook

    layout = make_layout(
        "cells-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True
    )
    ensure_course(layout)
    (tmp_path / "src").mkdir()
    add_assignment(layout, PS, [source_notebook(tmp_path / "src" / "ps1.ipynb")])
    generate_assignment(layout, PS)
    release_assignment(layout, PS)
    for student, how in TAMPERING.items():
        home = tmp_path / "home" / student
        folder = fetch_assignment(layout.exchange_root, layout.course_id, PS, student, home)
        notebook = nbformat.read(folder / "ps1.ipynb", as_version=4)
        for cell in notebook.cells:
            if grade_id(cell) == "add":
                cell.source = "def add(a, b):\n    return a + b"
            elif grade_id(cell) == "count":
                cell.source = "def count(n):\n    return n"
        notebook.cells = tamper(notebook.cells, how)
        nbformat.write(notebook, folder / "ps1.ipynb")
        submit_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    collect(layout, PS)
    backend = LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False, grace_s=1.0
    )
    outcomes = autograde_assignment(layout, PS, list(TAMPERING), LIMITS, backend)
    got = {o.student_id: (o.status, o.score, o.max_score, o.message) for o in outcomes}
    put_back = "graded; graded with the assignment's cells, put back: "
    assert got == {
        "p1": ("graded", 6.0, 6.0, "graded"),
        "p2": ("graded", 6.0, 6.0, put_back + "test_add (deleted by the student)"),
        "p3": ("graded", 6.0, 6.0, put_back + "test_add_hidden (deleted by the student)"),
        "p4": ("graded", 6.0, 6.0, put_back + "test_add_hidden (deleted by the student)"),
        "p5": ("graded", 6.0, 6.0, put_back + "test_count (edited by the student)"),
    }
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        for student in TAMPERING:
            submission = gradebook.find_submission(PS, student)
            assert not submission.needs_manual_grade, student
            assert submission.max_score == 6.0
