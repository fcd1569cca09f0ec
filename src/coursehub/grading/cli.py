"""``coursehub grading ...``: nbgrader per course, from the command line.

Teacher: ``setup``, ``add``, ``schedule``, ``generate``, ``release``, ``status``,
``collect``, ``autograde``, ``feedback``, ``export``, ``grades``; admin:
``hub-config``, ``student-config``; student: ``fetch``, ``submit``. Paths
come from ``COURSEHUB_GRADING_*`` (:func:`coursehub.grading.layout.layout_from_env`).
Each sub-parser names its handler in :mod:`coursehub.grading.commands`
(``set_defaults(func=...)``); nothing heavy is imported here.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coursehub.grading import commands

#: Sub-commands taking a course and an assignment: (help, handler).
STEPS = {
    "generate": ("make the student version of an assignment", commands.generate),
    "release": ("release a generated assignment to the exchange", commands.release),
    "collect": ("collect the newest submission of each student", commands.collect),
    "feedback": (
        "generate and release feedback of autograded submissions",
        commands.feedback,
    ),
    "status": ("show who fetched, submitted, was collected and autograded", commands.status),
}


def register(subparsers: Any) -> None:
    """Add ``coursehub grading`` and its sub-commands to ``subparsers``."""
    parser = subparsers.add_parser(
        "grading",
        help="nbgrader assignments per course: release, collect, autograde, grades",
        description="nbgrader per course: course directory, exchange, gradebook, assignments.",
    )
    sub = parser.add_subparsers(dest="grading_command", metavar="STEP", required=True)
    _add_teacher_steps(sub)
    _add_autograde(sub)
    _add_grade_tables(sub)
    _add_admin_steps(sub)
    _add_student_steps(sub)


def _add_teacher_steps(sub: Any) -> None:
    """Add ``setup``, ``add`` and the steps of :data:`STEPS` (course and assignment)."""
    setup = sub.add_parser("setup", help="create the course's nbgrader folders, sync gradebook")
    setup.add_argument("course_id")
    setup.set_defaults(func=commands.setup)
    add = sub.add_parser("add", help="add an assignment from source notebooks with nbgrader cells")
    add.add_argument("course_id")
    add.add_argument("assignment")
    add.add_argument("files", nargs="+", type=Path, help="notebooks (and data files)")
    add.set_defaults(func=commands.add)
    for step, (text, handler) in STEPS.items():
        p = sub.add_parser(step, help=text)
        p.add_argument("course_id")
        p.add_argument("assignment")
        p.set_defaults(func=handler)
        if step == "collect":
            p.add_argument(
                "--before-duedate",
                action="store_true",
                help="take each student's newest submission made by the due date, when there is "
                "one (nbgrader's ExchangeCollect.before_duedate; the assignment's after-due rule "
                "keep_on_time does the same)",
            )
    _add_schedule(sub)


def _add_schedule(sub: Any) -> None:
    """Add ``schedule COURSE_ID ASSIGNMENT --due ... --timezone ... --late ... --after-due ...``."""
    from coursehub.grading.policynames import AFTER_DUE, LATE_METHODS

    p = sub.add_parser(
        "schedule",
        help="set an assignment's due date and late policy (as the course page's form does)",
    )
    p.add_argument("course_id")
    p.add_argument("assignment")
    p.set_defaults(func=commands.schedule)
    p.add_argument(
        "--due",
        default="",
        metavar="'YYYY-MM-DD HH:MM'",
        help="due date in --timezone, or with an offset (empty: no due date)",
    )
    p.add_argument(
        "--timezone",
        help="IANA zone of --due (default: COURSEHUB_GRADING_TIMEZONE, else UTC)",
    )
    p.add_argument("--late", choices=list(LATE_METHODS), default="none", help="late penalty")
    p.add_argument("--points-per-hour", help="points off per hour late (with --late per_hour)")
    p.add_argument(
        "--after-due",
        choices=list(AFTER_DUE),
        default="accept",
        help="after the due date: accept (the newest is graded), keep_on_time (an on-time "
        "submission stays graded) or refuse (a hard deadline)",
    )


def _add_autograde(sub: Any) -> None:
    """Add ``autograde COURSE_ID ASSIGNMENT [--timeout S] [--parallel N] [--force]``."""
    auto = sub.add_parser(
        "autograde", help="autograde the collected submissions, side by side (runner jobs)"
    )
    auto.add_argument("course_id")
    auto.add_argument("assignment")
    auto.set_defaults(func=commands.autograde)
    auto.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="wall-clock limit of one submission (default: %(default)s s)",
    )
    auto.add_argument(
        "--parallel",
        type=_positive_int,
        metavar="N",
        help="submissions graded at once (default: as many as the runner's CPU slots hold "
        "jobs of the course's thread count)",
    )
    auto.add_argument(
        "--force",
        action="store_true",
        help="grade again the submissions already graded (default: skip them, so that an "
        "interrupted run continues where it stopped)",
    )
    auto.add_argument(
        "--worker",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="grade in one long-lived worker per slot, nbgrader imported once (default: "
        "$COURSEHUB_GRADING_WORKER, true); --no-worker: one runner job per submission",
    )


def _add_grade_tables(sub: Any) -> None:
    """Add ``export`` (nbgrader's CSV) and ``grades`` (the grade table)."""
    export = sub.add_parser("export", help="write the grades as nbgrader's CSV")
    export.add_argument("course_id")
    export.add_argument("-o", "--output", type=Path, default=Path("grades.csv"))
    export.set_defaults(func=commands.export)
    grades = sub.add_parser("grades", help="print the course's grade table")
    grades.add_argument("course_id")
    grades.set_defaults(func=commands.grade_table)


def _add_admin_steps(sub: Any) -> None:
    """Add ``hub-config``, ``student-config`` and ``grader-user``."""
    hub = sub.add_parser(
        "hub-config",
        help="print jupyterhub_config.py lines: one formgrader each (as root: each runs as "
        "its course's own account formgrade-COURSE_ID, created here)",
    )
    hub.add_argument("course_ids", nargs="+")
    hub.set_defaults(func=commands.hub_config)
    hub.add_argument(
        "--hub-data-dir",
        default="/srv/jupyterhub",
        help="the hub's data folder (its jupyterhub.sqlite: the hub's id in the formgraders' "
        "account names; default: %(default)s, as coursehub hub config renders it)",
    )
    student = sub.add_parser("student-config", help="print the servers' global nbgrader_config.py")
    student.set_defaults(func=commands.student_config)
    grader = sub.add_parser(
        "grader-user", help="admin: create the Unix account that runs students' code"
    )
    grader.set_defaults(func=commands.grader_user)


def _add_student_steps(sub: Any) -> None:
    """Add the students' ``fetch`` and ``submit`` (course, assignment, ``--student``, ``--dir``)."""
    for step, handler in (("fetch", commands.fetch), ("submit", commands.submit)):
        p = sub.add_parser(step, help=f"student: {step} an assignment")
        p.add_argument("course_id")
        p.add_argument("assignment")
        p.set_defaults(func=handler)
        p.add_argument(
            "--student",
            help="student id: yourself (the hub user, else the Unix "
            "user); another student's only as root outside a hub server",
        )
        p.add_argument("--dir", type=Path, help="working folder (default: the current one)")


def _positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)
