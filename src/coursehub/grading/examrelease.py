"""Release of an exam's scores and feedback at a chosen time.

``coursehub exam release COURSE ASSIGNMENT --at TIME`` (or ``--clear``) sets
the time (:func:`coursehub.catalog.examproctor.schedule_release`);
``coursehub exam release-due COURSE``, run from a timer (every few minutes,
as the bell), generates and releases the feedback of each exam of the
course whose time has come and that has autograded submissions, once: a record
``<course>/coursehub/exam-release-<assignment>.json`` says when it was
released, and a later run leaves it alone. The feedback is nbgrader's
(``generate_feedback`` then ``release_feedback``), as ``coursehub grading
feedback`` makes it; students fetch it as for any assignment.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError
from coursehub.grading.examcommands import (
    cli_options,
    course_exam,
    exam_transaction,
    print_warnings,
)


def record_path(reports_dir: Path, assignment: str) -> Path:
    """The record of an exam's feedback release in the course's reports folder."""
    return reports_dir / f"exam-release-{assignment}.json"


def due_exams(exams: list[Any], reports_dir: Path, now: datetime) -> list[Any]:
    """Return the exams whose release time has come and that have no release record (pure)."""
    return [
        e
        for e in exams
        if e.release_at is not None
        and e.release_at <= now
        and not record_path(reports_dir, e.assignment).exists()
    ]


@cli_options
def release(args: argparse.Namespace) -> int:
    """``coursehub exam release``: set (``--at``) or clear (``--clear``) the release time."""
    from coursehub.catalog.examproctor import schedule_release
    from coursehub.catalog.examtime import format_moment, parse_moment

    with exam_transaction(args) as session:
        _, exam = course_exam(session, args)
        when = None if args.clear else parse_moment(args.at, exam.timezone, "release_at")
        warnings = schedule_release(exam, when)
        shown = "by hand" if when is None else format_moment(when, exam.timezone)
        print(f"scores and feedback of {exam.assignment}: released {shown}")
    print_warnings(warnings)
    return 0


@cli_options
def release_due(args: argparse.Namespace) -> int:
    """``coursehub exam release-due``: release each exam's feedback whose time has come (1: one
    failed, named; the others are still released)."""
    from coursehub.atomicfile import write_atomically
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.exams import list_exams
    from coursehub.grading.assignments import generate_feedback, release_feedback
    from coursehub.grading.layout import layout_from_env

    layout = layout_from_env(args.course_id)
    now = datetime.now(UTC)
    with exam_transaction(args) as session:
        exams = list_exams(session, get_course(session, args.course_id))
        due = [(e.assignment, e.release_at) for e in due_exams(exams, layout.reports_dir, now)]
    failed = waiting = 0
    for assignment, release_at in due:
        if not any(layout.course_dir.glob(f"autograded/*/{assignment}")):
            waiting += 1  # released at a later run, once something is autograded
            print(f"{assignment}: nothing autograded yet; released once it is")
            continue
        try:
            generate_feedback(layout, assignment)
            release_feedback(layout, assignment)
        except CoursehubError as exc:
            failed += 1
            print(f"{assignment}: feedback not released: {exc}")
            continue
        record = {"released_at": now.isoformat(), "scheduled_for": release_at.isoformat()}
        write_atomically(record_path(layout.reports_dir, assignment), json.dumps(record), 0o640)
        print(f"{assignment}: scores and feedback released")
    released = len(due) - failed - waiting
    print(f"{layout.course_id}: {released} exam(s) released, {failed} failed, {waiting} waiting")
    return 1 if failed else 0
