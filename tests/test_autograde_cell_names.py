"""Real nbgrader autograde runs: the outcome message names the cell that timed out or killed
the kernel, as the student knows it, and the points it says were lost are the gradebook's.

A small assignment (otter-grader#148, #469): a solution cell ``add`` tested
by ``test_add`` (2 points) and ``test_add_hidden`` (3 points), a solution
cell ``count`` tested by ``test_count`` (1 point): 6 points. Each student
answers correctly, then puts an endless loop in a cell of their own
(no nbgrader metadata), in the solution cell ``count``, or in ``count()``
so that the test cell ``test_count`` loops.
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
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool

pytestmark = pytest.mark.slow

PS = "ps1"
TIMEOUT_S = 5
LOOP = "while True:\n    pass\n"
LIMITS = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=240)


def nbgrader(grade_id: str, solution: bool = False, points: int = 0) -> dict:
    meta = {"grade_id": grade_id, "solution": solution, "grade": points > 0, "locked": not solution}
    meta["schema_version"] = 3
    if points:
        meta["points"] = points
    return {"nbgrader": meta}


def source_notebook(path: Path, suffix: str = "") -> Path:
    """Write the 6-point source notebook; ``suffix`` ends every grade id (a second notebook)."""
    s = suffix
    cells = [
        new_markdown_cell("Write `add(a, b)` and `count(n)`.", metadata=nbgrader(f"intro{s}")),
        new_code_cell(
            "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION",
            metadata=nbgrader(f"add{s}", solution=True),
        ),
        new_code_cell("assert add(1, 2) == 3", metadata=nbgrader(f"test_add{s}", points=2)),
        new_code_cell(
            "assert add(2, 2) == 4\n### BEGIN HIDDEN TESTS\nassert add(-1, 1) == 0\n"
            "### END HIDDEN TESTS",
            metadata=nbgrader(f"test_add_hidden{s}", points=3),
        ),
        new_code_cell(
            "def count(n):\n    ### BEGIN SOLUTION\n    return len(range(n))\n    ### END SOLUTION",
            metadata=nbgrader(f"count{s}", solution=True),
        ),
        new_code_cell("assert count(3) == 3", metadata=nbgrader(f"test_count{s}", points=1)),
    ]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), path)
    return path


def new_course(tmp_path: Path, notebooks: int = 1) -> CourseLayout:
    layout = make_layout(
        "cells-2025",
        tmp_path / "courses",
        tmp_path / "exchange",
        single_user=True,
        execute_timeout_s=TIMEOUT_S,
    )
    ensure_course(layout)
    (tmp_path / "src").mkdir()
    names = ["ps1", "ps2"][:notebooks]
    sources = [
        source_notebook(tmp_path / "src" / f"{n}.ipynb", f"_{n}" * (notebooks > 1)) for n in names
    ]
    add_assignment(layout, PS, sources)
    generate_assignment(layout, PS)
    release_assignment(layout, PS)
    return layout


def grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def answer(layout: CourseLayout, root: Path, student: str, edits: dict[str, str]) -> None:
    """Fetch as ``student``, answer every solution cell, apply ``edits``, submit.

    ``edits``: notebook name -> ``own_cell`` (a cell of the student's after
    ``add``), ``solution_cell`` (a loop before ``count``), ``test_cell``
    (``count()`` loops), ``kernel_death`` (a cell of the student's that ends
    the kernel) or ``""`` (nothing).
    """
    home = root / "home" / student
    folder = fetch_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    for path in sorted(folder.glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if grade_id(cell).startswith("add"):
                cell.source = "def add(a, b):\n    return a + b"
            elif grade_id(cell).startswith("count"):
                cell.source = "def count(n):\n    return n"
        edit = edits.get(path.stem, "")
        at = next(i for i, c in enumerate(notebook.cells) if grade_id(c).startswith("add")) + 1
        counting = next(c for c in notebook.cells if grade_id(c).startswith("count"))
        if edit == "own_cell":
            notebook.cells.insert(at, new_code_cell("# my experiment\n" + LOOP))
        elif edit == "kernel_death":
            notebook.cells.insert(at, new_code_cell("import os\nos._exit(1)"))
        elif edit == "solution_cell":
            counting.source = LOOP + counting.source
        elif edit == "test_cell":
            counting.source = "def count(n):\n    " + LOOP.replace("\n    ", "\n        ")
        nbformat.write(notebook, path)
    submit_assignment(layout.exchange_root, layout.course_id, PS, student, home)


def grade(layout: CourseLayout, tmp_path: Path, students: list[str]) -> dict:
    collect(layout, PS)
    backend = LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False, grace_s=1.0
    )
    outcomes = autograde_assignment(layout, PS, students, LIMITS, backend)
    return {o.student_id: (o.status, o.score, o.max_score, o.message) for o in outcomes}


def test_a_timeout_names_the_cell_as_the_student_knows_it_and_the_points_it_cost(tmp_path):
    layout = new_course(tmp_path)
    answer(layout, tmp_path, "ana", {"ps1": "own_cell"})
    answer(layout, tmp_path, "ben", {"ps1": "solution_cell"})
    answer(layout, tmp_path, "cleo", {"ps1": "test_cell"})
    answer(layout, tmp_path, "dora", {})
    answer(layout, tmp_path, "eve", {"ps1": "kernel_death"})
    took = f"interrupted after {TIMEOUT_S} s (infinite loop?)"
    assert grade(layout, tmp_path, ["ana", "ben", "cleo", "dora", "eve"]) == {
        # the student's own cell is the 3rd (after the markdown cell and "add"): no points
        "ana": ("timeout", 6.0, 6.0, f"{took} in your cell 3 (not graded); no points lost"),
        # the loop stops "count" before its def: test_count fails on a NameError
        "ben": ("timeout", 5.0, 6.0, f"{took} in cell count; points lost: 1 of 1 in test_count"),
        "cleo": (
            "timeout",
            5.0,
            6.0,
            f"{took} in cell test_count; points lost: 1 of 1 in test_count",
        ),
        "dora": ("graded", 6.0, 6.0, "graded"),
        "eve": (
            "failed",
            0.0,
            6.0,
            "assignment ps1, student eve: nbgrader failed: the kernel died in your cell 3"
            " (not graded): it exited, crashed or ran out of memory, and grading stopped there;"
            " score 0/6",
        ),
    }


def test_several_notebooks_and_several_interrupted_cells_are_each_named(tmp_path):
    layout = new_course(tmp_path, notebooks=2)
    answer(layout, tmp_path, "ana", {"ps1": "own_cell", "ps2": "solution_cell"})
    answer(layout, tmp_path, "ben", {"ps2": "test_cell"})
    took = f"interrupted after {TIMEOUT_S} s (infinite loop?)"
    assert grade(layout, tmp_path, ["ana", "ben"]) == {
        "ana": (
            "timeout",
            11.0,
            12.0,
            f"{took} in your cell 3 of ps1 (not graded), cell count_ps2 of ps2; "
            "points lost: 1 of 1 in test_count_ps2 of ps2",
        ),
        "ben": (
            "timeout",
            11.0,
            12.0,
            f"{took} in cell test_count_ps2 of ps2; points lost: 1 of 1 in test_count_ps2 of ps2",
        ),
    }


def test_a_kernel_that_dies_in_a_cell_is_reported_with_that_cell(tmp_path):
    layout = new_course(tmp_path, notebooks=2)
    answer(layout, tmp_path, "ana", {"ps2": "kernel_death"})
    answer(layout, tmp_path, "ben", {"ps1": "kernel_death", "ps2": "kernel_death"})
    died = "nbgrader failed: the kernel died in your cell 3 of"
    # nbgrader graded ps1 before ps2's kernel died: the gradebook keeps ps1's 6 points;
    # a kernel dying in ps1 stops nbgrader before ps2
    assert grade(layout, tmp_path, ["ana", "ben"]) == {
        "ana": (
            "failed",
            6.0,
            12.0,
            f"assignment ps1, student ana: {died} ps2 (not graded): it exited, crashed or ran"
            " out of memory, and grading stopped there; score 6/12",
        ),
        "ben": (
            "failed",
            0.0,
            12.0,
            f"assignment ps1, student ben: {died} ps1 (not graded): it exited, crashed or ran"
            " out of memory, and grading stopped there; score 0/12",
        ),
    }
