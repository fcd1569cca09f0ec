"""The task gradebooks of a job array: a copy of the course's to start from, merged back after.

Each task of a batch's job array grades into its own SQLite gradebook
(:mod:`coursehub.grading.autograde.arraytask`), written by that task only,
so that no SQLite lock is shared between nodes (SQLite's locks are not to
be trusted on network file systems: https://www.sqlite.org/lockingv3.html,
section 6). It starts as a copy of the course's gradebook
(:func:`copy_gradebook`: nbgrader's autograde needs the assignment, its
source cells and the students there), and the submitting side merges what
autograde wrote back into the course's gradebook (:func:`merge_gradebook`)
through nbgrader's own ``Gradebook`` API
(https://nbgrader.readthedocs.io/en/stable/api/gradebook.html).

What nbgrader's autograde writes, and so what is merged: the submission and
its ``timestamp`` (``Gradebook.update_or_create_submission``), each
notebook's ``late_submission_penalty`` (``AssignLatePenalties``), each
grade's ``auto_score`` and ``needs_manual_grade`` (``SaveAutoGrades``) and
each comment's ``auto_comment``. What a teacher sets (``manual_score``,
``extra_credit``, ``manual_comment``, ``flagged``, extensions) is the
course's and is left as it is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def copy_gradebook(source: Path, target: Path) -> None:
    """Copy the SQLite gradebook ``source`` to ``target`` consistently, even while it is written.

    SQLite's online backup (Python ``sqlite3.Connection.backup``,
    https://www.sqlite.org/backup.html) reads a consistent snapshot under
    the database's own lock. ``target`` is made 0600.

    Raises
    ------
    sqlite3.Error
        If ``source`` is not a SQLite database.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    target.touch(mode=0o600, exist_ok=True)
    with sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=300) as src:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    src.close()


def merge_gradebook(
    source_url: str, target_url: str, course_id: str, assignment_id: str, students: Iterable[str]
) -> list[str]:
    """Copy what autograde wrote for ``students`` from one gradebook into another.

    Parameters
    ----------
    source_url, target_url
        SQLAlchemy URLs of the task's gradebook and of the course's.
    course_id, assignment_id
        nbgrader's course and assignment.
    students
        The ``student_id`` of each submission to copy; one the task's
        gradebook has no submission of is skipped.

    Returns
    -------
    list[str]
        The ``student_id`` of each submission copied, in the order given.

    Raises
    ------
    nbgrader.api.MissingEntry
        If the course's gradebook lacks a notebook or cell the task graded
        (the assignment's source changed while the array ran).
    """
    from nbgrader.api import Gradebook, MissingEntry

    merged = []
    with (
        Gradebook(source_url, course_id=course_id) as source,
        Gradebook(target_url, course_id=course_id) as target,
    ):
        for student_id in students:
            try:
                graded = source.find_submission(assignment_id, student_id)
            except MissingEntry:
                continue
            with target.db.no_autoflush:  # nbgrader builds the rows one by one
                copy = target.update_or_create_submission(
                    assignment_id, student_id, timestamp=graded.timestamp
                )
            for notebook in graded.notebooks:
                merge_notebook(target, notebook, assignment_id, student_id)
            target.db.commit()
            merged.append(copy.student.id)
    return merged


def merge_notebook(target: Any, notebook: Any, assignment_id: str, student_id: str) -> None:
    """Copy one submitted notebook's late penalty, grades and comments into ``target``.

    ``target``: an open nbgrader ``Gradebook``; ``notebook``: a ``SubmittedNotebook`` of another.
    """
    name = notebook.name
    into = target.find_submission_notebook(name, assignment_id, student_id)
    into.late_submission_penalty = notebook.late_submission_penalty
    for grade in notebook.grades:
        mine = target.find_grade(grade.name, name, assignment_id, student_id)
        mine.auto_score = grade.auto_score
        mine.needs_manual_grade = grade.needs_manual_grade
    for comment in notebook.comments:
        mine = target.find_comment(comment.name, name, assignment_id, student_id)
        mine.auto_comment = comment.auto_comment
