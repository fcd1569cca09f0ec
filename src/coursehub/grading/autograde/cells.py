"""Which cells an outcome message names, and the points a submission lost.

nbgrader interrupts a cell that runs past ``Execute.timeout`` and records a
``CellTimeoutError`` output in it (nbgrader 0.9 ``preprocessors/execute.py``,
``error_on_timeout``). The cell is named as the student and the teacher know
it (otter-grader#148, #469):

- an nbgrader cell by its ``grade_id`` (``cell count``);
- a cell the student added (no ``nbgrader`` metadata) by its 1-based
  position in the notebook (``your cell 3 (not graded)``): it carries no
  points and has no name;
- with the notebook's name (``cell count of ps1``) when the assignment has
  several notebooks (grade ids are unique within a notebook only).

A kernel that dies in a cell (``os._exit``, a crash, the kernel alone killed
for memory: nbclient ``DeadKernelError``) stops nbgrader before it writes the
autograded notebook, so the job's log names that cell
(:func:`kernel_died_line`, written by
:class:`coursehub.grading.sandbox.kernel.SandboxExecute`) and the outcome
reads it back (:func:`kernel_died_cell`).

The points lost are read from the gradebook, cell by cell (nbgrader
``Grade``: ``score`` out of ``max_score``), so the message says what the
score says: a loop in the student's own cell costs nothing, a loop in a
solution cell costs the tests that need it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from coursehub.grading.autograde.gradebook import gradebook_url
from coursehub.grading.layout import CourseLayout

#: The ``ename`` of the error output nbgrader records in an interrupted cell.
TIMEOUT_ENAME = "CellTimeoutError"
#: Starts the job log's line naming the cell the kernel died in (JSON of a :class:`CellRef`).
KERNEL_DIED_MARK = "coursehub: the kernel died in cell "


@dataclass(frozen=True)
class CellRef:
    """One cell of a submitted notebook.

    ``notebook``: the notebook's name without ``.ipynb`` (nbgrader's notebook
    id); ``position``: 1-based index of the cell in the notebook, markdown
    cells included (what the student counts in JupyterLab); ``grade_id``: the
    cell's nbgrader ``grade_id``, ``""`` for a cell without nbgrader metadata.
    """

    notebook: str
    position: int
    grade_id: str = ""


def cell_label(cell: CellRef, with_notebook: bool = False) -> str:
    """Return how a message names ``cell`` (pure).

    ``cell count``, ``your cell 3 (not graded)``; with ``with_notebook``:
    ``cell count of ps1``, ``your cell 3 of ps1 (not graded)``.
    """
    where = f" of {cell.notebook}" if with_notebook else ""
    if cell.grade_id:
        return f"cell {cell.grade_id}{where}"
    return f"your cell {cell.position}{where} (not graded)"


def cell_labels(cells: Sequence[CellRef], several_notebooks: bool) -> str:
    """Return ``cells`` named with :func:`cell_label`, joined by ``", "`` (pure)."""
    return ", ".join(cell_label(c, several_notebooks) for c in cells)


def autograded_notebooks(layout: CourseLayout, assignment: str, student_id: str) -> list[Path]:
    """Return the autograded notebooks of a submission, sorted by name."""
    folder = layout.course_dir / "autograded" / student_id / assignment
    return sorted(folder.glob("*.ipynb"))


def cells_with_error(path: Path, ename: str) -> list[CellRef]:
    """Return the cells of the notebook at ``path`` with an error output named ``ename``."""
    import nbformat

    found = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells, start=1):
        outputs = cell.get("outputs", [])
        if any(o.get("output_type") == "error" and o.get("ename") == ename for o in outputs):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            found.append(CellRef(path.stem, index, grade_id))
    return found


def timed_out_cells(layout: CourseLayout, assignment: str, student_id: str) -> list[CellRef]:
    """Return the autograded cells nbgrader interrupted (``CellTimeoutError``), in order."""
    notebooks = autograded_notebooks(layout, assignment, student_id)
    return [c for path in notebooks for c in cells_with_error(path, TIMEOUT_ENAME)]


def kernel_died_line(cell: CellRef) -> str:
    """Return the log line naming the cell the kernel died in (pure)."""
    return KERNEL_DIED_MARK + json.dumps(asdict(cell), sort_keys=True)


def kernel_died_cell(log_text: str) -> CellRef | None:
    """Return the cell of the last :func:`kernel_died_line` in a job's log (None: none)."""
    for line in reversed(log_text.splitlines()):
        at = line.find(KERNEL_DIED_MARK)
        if at < 0:
            continue
        try:
            fields = json.loads(line[at + len(KERNEL_DIED_MARK) :])
            return CellRef(
                str(fields["notebook"]), int(fields["position"]), str(fields["grade_id"])
            )
        except (ValueError, KeyError, TypeError):
            return None
    return None


@dataclass(frozen=True)
class LostPoints:
    """Points a graded cell lost: ``lost`` of ``max_score`` in ``grade_id`` of ``notebook``."""

    notebook: str
    grade_id: str
    lost: float
    max_score: float


def lost_points(layout: CourseLayout, assignment: str, student_id: str) -> list[LostPoints]:
    """Return the graded cells of a submission scoring below their maximum (gradebook).

    Cells still waiting for a manual grade (nbgrader ``needs_manual_grade``,
    no score yet) are left out: they have lost nothing yet.
    """
    from nbgrader.api import Gradebook

    lost = []
    with Gradebook(gradebook_url(layout), course_id=layout.course_id) as gradebook:
        submission = gradebook.find_submission(assignment, student_id)
        for notebook in sorted(submission.notebooks, key=lambda n: n.name):
            for grade in notebook.grades:
                waiting = grade.auto_score is None and grade.manual_score is None
                missing = float(grade.max_score or 0) - float(grade.score or 0)
                if not waiting and missing > 0:
                    lost.append(LostPoints(notebook.name, grade.name, missing, grade.max_score))
    order = cell_positions(layout, assignment, student_id)
    return sorted(lost, key=lambda p: (p.notebook, order.get((p.notebook, p.grade_id), 0)))


def cell_positions(
    layout: CourseLayout, assignment: str, student_id: str
) -> dict[tuple[str, str], int]:
    """Return ``(notebook, grade_id) -> 1-based position`` of the autograded nbgrader cells."""
    import nbformat

    positions = {}
    for path in autograded_notebooks(layout, assignment, student_id):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells, start=1):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if grade_id:
                positions[(path.stem, grade_id)] = index
    return positions


def render_lost_points(lost: Sequence[LostPoints], several_notebooks: bool) -> str:
    """Return ``no points lost`` or ``points lost: 1 of 1 in test_count, ...`` (pure)."""
    if not lost:
        return "no points lost"
    parts = []
    for item in lost:
        where = f" of {item.notebook}" if several_notebooks else ""
        parts.append(f"{item.lost:g} of {item.max_score:g} in {item.grade_id}{where}")
    return "points lost: " + ", ".join(parts)
