"""Grading against the source's cells: deleted test cells put back, changes said in the outcome.

A student can delete an autograder test cell (or make it deletable, or strip
its nbgrader metadata in the metadata editor) before submitting. nbgrader
then grades the submission without it: the cell has no score and stays
``needs_manual_grade``, so the formgrader lists the submission as needing
manual grading with no cell to grade (jupyter/nbgrader#1682). nbgrader's
answer, ``OverwriteCells.add_missing_cells`` (nbgrader 0.9,
``nbgrader/preprocessors/overwritecells.py``), puts each missing grade cell
back from the gradebook's source cells; every course's ``nbgrader_config.py``
turns it on (:func:`course_integrity_config`) with
:class:`RestoringOverwriteCells`, which places a missing cell after the
nearest earlier source cell still in the submission (nbgrader's own looks up
only the one just before it and fails with a ``KeyError`` when that one is a
locked markdown cell or was deleted too). The feedback shows the cell put
back with :data:`MISSING_CELL_NOTICE` at its top.

A locked cell whose source was edited is graded with the source's text
(nbgrader's checksum check, which only logs a warning). The outcome of the
submission names both (:func:`cell_changes`, :func:`render_cell_changes`), so
the teacher sees it on the course page's "Last autograde" table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from nbgrader.preprocessors import OverwriteCells
from traitlets.config import Config

from coursehub.grading.autograde.gradebook import gradebook_url
from coursehub.grading.layout import CourseLayout

#: The text nbgrader writes at the top of a cell it put back (``{cell_id}``: its grade id).
MISSING_CELL_NOTICE = (
    "This cell ({cell_id}) was missing from your submission: it was put back from the "
    "assignment and graded.\n\n"
)


class RestoringOverwriteCells(OverwriteCells):
    """nbgrader's ``OverwriteCells``, putting missing grade cells back wherever they were."""

    def add_missing_grade_cells(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        """Insert each grade cell of the source that ``nb`` lacks, in the source's order.

        A missing cell goes after the nearest earlier source cell present in
        ``nb`` (at the top when there is none), as nbgrader's
        ``missing_cell_transform`` builds it.
        """
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        solutions = {cell.name for cell in source.solution_cells}
        points = {cell.name: cell.max_score for cell in source.grade_cells}
        order = [cell.name for cell in source.source_cells]
        present = [_grade_id(cell) for cell in nb.cells]
        for index, cell in enumerate(source.source_cells):
            if cell.name not in points or cell.name in present:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", cell.name)
            before = [name for name in order[:index] if name in present]
            at = present.index(before[-1]) + 1 if before else 0
            new = self.missing_cell_transform(
                cell, points[cell.name], is_solution=cell.name in solutions
            )
            nb.cells.insert(at, new)
            present.insert(at, cell.name)
        return nb, resources


def _grade_id(cell: Any) -> str:
    return str(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", ""))


def course_integrity_config() -> Config:
    """Return the part of a course's ``nbgrader_config.py`` grading against the source's cells.

    ``Autograde.sanitize_preprocessors`` with :class:`RestoringOverwriteCells`
    in place of ``OverwriteCells``, ``add_missing_cells`` on and the notice
    :data:`MISSING_CELL_NOTICE`.
    """
    from nbgrader.converters.autograde import Autograde

    default = Autograde.class_traits()["sanitize_preprocessors"].default()
    config = Config()
    config.Autograde.sanitize_preprocessors = [
        RestoringOverwriteCells if pp is OverwriteCells else pp for pp in default
    ]
    config.OverwriteCells.add_missing_cells = True
    config.OverwriteCells.missing_cell_notification = MISSING_CELL_NOTICE
    return config


@dataclass(frozen=True)
class CellChange:
    """A cell of the source the student changed: ``kind`` is ``deleted`` or ``edited``."""

    notebook: str
    grade_id: str
    kind: str


@dataclass(frozen=True)
class SourceCell:
    """A source cell: its id, whether graded or locked, the released cell's nbgrader checksum."""

    grade_id: str
    graded: bool
    locked: bool
    checksum: str


def plan_cell_changes(
    notebook: str, source: Sequence[SourceCell], submitted: Iterable[Any]
) -> list[CellChange]:
    """Return the grade cells ``submitted`` lacks and the locked cells it edited (pure).

    A cell without its nbgrader metadata counts as deleted; edited means
    nbgrader's checksum of the submitted cell differs from ``checksum``
    (the released cell's; none known: not compared).
    """
    from nbgrader.utils import compute_checksum

    by_id = {_grade_id(cell): cell for cell in submitted if _grade_id(cell)}
    changes = []
    for cell in source:
        got = by_id.get(cell.grade_id)
        if got is None and cell.graded:
            changes.append(CellChange(notebook, cell.grade_id, "deleted"))
        elif got is not None and cell.locked and cell.checksum not in ("", compute_checksum(got)):
            changes.append(CellChange(notebook, cell.grade_id, "edited"))
    return changes


def cell_changes(layout: CourseLayout, assignment: str, student_id: str) -> list[CellChange]:
    """Return the changes to the source's cells in the collected submission of ``student_id``."""
    import nbformat
    from nbgrader.api import Gradebook

    folder = layout.course_dir / "submitted" / student_id / assignment
    changes = []
    with Gradebook(gradebook_url(layout), course_id=layout.course_id) as gradebook:
        for notebook in gradebook.find_assignment(assignment).notebooks:
            path = folder / f"{notebook.name}.ipynb"
            if not path.is_file():
                continue  # nbgrader scores a missing notebook 0 itself
            graded = {cell.name for cell in notebook.grade_cells}
            released = released_checksums(layout, assignment, notebook.name)
            source = [
                SourceCell(c.name, c.name in graded, bool(c.locked), released.get(c.name, ""))
                for c in notebook.source_cells
            ]
            cells = nbformat.read(path, as_version=4).cells
            changes += plan_cell_changes(notebook.name, source, cells)
    return changes


def released_checksums(layout: CourseLayout, assignment: str, notebook: str) -> dict[str, str]:
    """Return ``grade_id -> nbgrader checksum`` of the cells of the released notebook.

    The released cell, not the gradebook's: a test cell with hidden tests
    differs from the source's in every submission (nbgrader puts them back
    through its checksum check).
    """
    import nbformat
    from nbgrader.utils import compute_checksum

    path = layout.course_dir / "release" / assignment / f"{notebook}.ipynb"
    if not path.is_file():
        return {}
    cells = nbformat.read(path, as_version=4).cells
    return {_grade_id(c): compute_checksum(c) for c in cells if _grade_id(c)}


def render_cell_changes(changes: Sequence[CellChange], several_notebooks: bool = False) -> str:
    """Return ``""`` or ``; cells put back from the assignment: test_add (deleted), ...`` (pure)."""
    if not changes:
        return ""
    parts = []
    for change in changes:
        where = f" of {change.notebook}" if several_notebooks else ""
        parts.append(f"{change.grade_id}{where} ({change.kind} by the student)")
    return "; graded with the assignment's cells, put back: " + ", ".join(parts)
