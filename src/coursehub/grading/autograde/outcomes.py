"""What grading one submission gave: its :class:`SubmissionOutcome`, and the outcomes file.

The outcomes of an assignment's last autograde are kept as JSON in
``<course_dir>/coursehub/autograde-<assignment>.json`` (:func:`save_outcomes`,
rewritten after each submission) and read back by the next run, which keeps
what was graded already (:func:`coursehub.grading.autograde.plan.plan_pending`),
and by the course page.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.grading.layout import CourseLayout

#: The outcome status of a submission that a host fault stopped (:class:`SubmissionOutcome`).
HOST_ERROR = "error"


@dataclass(frozen=True)
class SubmissionOutcome:
    """How grading one submission went.

    ``status``: ``graded``, ``timeout`` (a cell was interrupted by
    ``Execute.timeout``; graded, the message names the cell and the points lost),
    ``killed`` (the runner
    stopped the job: score 0), ``failed`` (nbgrader failed: score 0),
    ``corrupt`` (unreadable notebook: score 0), ``error`` (a fault of the host, not of
    the student's code: the runner failed, or the kernel died before it ran a cell;
    score 0, and ``coursehub grading autograde`` exits 1), ``not-on-roster`` (not graded).
    ``submitted_at``: the submission's nbgrader ``timestamp.txt`` ("" if none),
    so that a later run knows whether it was graded already.
    """

    student_id: str
    status: str
    score: float | None
    max_score: float
    message: str
    submitted_at: str = ""


def not_on_roster(layout: CourseLayout, student_ids: Iterable[str]) -> list[SubmissionOutcome]:
    """Return the ``not-on-roster`` outcomes of submitters who are not on the roster."""
    return [
        SubmissionOutcome(
            s,
            "not-on-roster",
            None,
            0.0,
            f"{s} is not on the roster of course {layout.course_id}: not graded",
        )
        for s in student_ids
    ]


def outcomes_path(layout: CourseLayout, assignment: str) -> Path:
    """Return the outcomes file of ``assignment``: ``reports_dir/autograde-<assignment>.json``."""
    return layout.reports_dir / f"autograde-{assignment}.json"


def save_outcomes(layout: CourseLayout, assignment: str, outcomes: list[SubmissionOutcome]) -> Path:
    """Write the outcomes to ``reports_dir/autograde-<assignment>.json`` (atomically)."""
    path = outcomes_path(layout, assignment)
    write_atomically(path, json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    return path


def load_outcomes(layout: CourseLayout, assignment: str) -> list[SubmissionOutcome]:
    """Read the outcomes of the last autograde of ``assignment`` (empty list if none)."""
    path = outcomes_path(layout, assignment)
    if not path.is_file():
        return []
    known = set(SubmissionOutcome.__dataclass_fields__)
    try:
        items = json.loads(path.read_text("utf-8"))
        return [SubmissionOutcome(**{k: v for k, v in i.items() if k in known}) for i in items]
    except (ValueError, TypeError, AttributeError):  # damaged by hand: grade everything again
        return []


def render_outcomes(assignment: str, outcomes: list[SubmissionOutcome]) -> str:
    """Return one line per submission: ``assignment student status score/max message``."""
    lines = []
    for o in outcomes:
        score = "-" if o.score is None else f"{o.score:g}/{o.max_score:g}"
        lines.append(f"{assignment}  {o.student_id:<16} {o.status:<13} {score:>7}  {o.message}")
    return "\n".join(lines)
