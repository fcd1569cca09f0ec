"""``coursehub grading ...``: nbgrader per course, from the command line.

Teacher: ``setup``, ``add``, ``schedule``, ``generate``, ``release``, ``status``,
``collect``, ``autograde``, ``feedback``, ``export``, ``grades``; admin:
``hub-config``, ``student-config``; student: ``fetch``, ``submit``. Paths
come from ``COURSEHUB_GRADING_*`` (:func:`coursehub.grading.layout.layout_from_env`).
Nothing heavy is imported here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

#: Sub-commands taking a course and an assignment, with their help.
STEPS = {
    "generate": "make the student version of an assignment",
    "release": "release a generated assignment to the exchange",
    "collect": "collect the newest submission of each student",
    "feedback": "generate and release feedback of autograded submissions",
    "status": "show who fetched, submitted, was collected and autograded",
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
    parser.set_defaults(func=run)


def _add_teacher_steps(sub: Any) -> None:
    """Add ``setup``, ``add`` and the steps of :data:`STEPS` (course and assignment)."""
    setup = sub.add_parser("setup", help="create the course's nbgrader folders, sync gradebook")
    setup.add_argument("course_id")
    add = sub.add_parser("add", help="add an assignment from source notebooks with nbgrader cells")
    add.add_argument("course_id")
    add.add_argument("assignment")
    add.add_argument("files", nargs="+", type=Path, help="notebooks (and data files)")
    for step, text in STEPS.items():
        p = sub.add_parser(step, help=text)
        p.add_argument("course_id")
        p.add_argument("assignment")
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
    grades = sub.add_parser("grades", help="print the course's grade table")
    grades.add_argument("course_id")


def _add_admin_steps(sub: Any) -> None:
    """Add ``hub-config``, ``student-config`` and ``grader-user``."""
    hub = sub.add_parser(
        "hub-config",
        help="print jupyterhub_config.py lines: one formgrader each (as root: each runs as "
        "its course's own account formgrade-COURSE_ID, created here)",
    )
    hub.add_argument("course_ids", nargs="+")
    hub.add_argument(
        "--hub-data-dir",
        default="/srv/jupyterhub",
        help="the hub's data folder (its jupyterhub.sqlite: the hub's id in the formgraders' "
        "account names; default: %(default)s, as coursehub hub config renders it)",
    )
    sub.add_parser("student-config", help="print the servers' global nbgrader_config.py")
    sub.add_parser("grader-user", help="admin: create the Unix account that runs students' code")


def _add_student_steps(sub: Any) -> None:
    """Add the students' ``fetch`` and ``submit`` (course, assignment, ``--student``, ``--dir``)."""
    for step in ("fetch", "submit"):
        p = sub.add_parser(step, help=f"student: {step} an assignment")
        p.add_argument("course_id")
        p.add_argument("assignment")
        p.add_argument(
            "--student",
            help="student id: yourself (the hub user, else the Unix "
            "user); another student's only as root outside a hub server",
        )
        p.add_argument("--dir", type=Path, help="working folder (default: the current one)")


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; print what it did."""
    from coursehub.grading.layout import layout_from_env

    command = args.grading_command
    if command == "hub-config":
        from coursehub.grading.formgrader.account import prepare_formgraders
        from coursehub.grading.formgrader.service import (
            full_server_enabled,
            render_formgrader_config,
        )

        layouts = [layout_from_env(c) for c in args.course_ids]
        from coursehub.contract import hub_id_of_data_dir

        hub_id = hub_id_of_data_dir(args.hub_data_dir)
        accounts = prepare_formgraders(layouts, hub_id)  # as root: one account per course
        text = render_formgrader_config(
            layouts, full_server=full_server_enabled(), accounts=accounts
        )
        print(text, end="")
        return 0
    if command == "grader-user":
        return _grader_user()
    if command == "student-config":
        from coursehub.grading.deadline import default_timezone, zone_of
        from coursehub.grading.studentconfig import render_student_config

        zone = zone_of(default_timezone()).key  # an unknown zone is refused here
        print(render_student_config(layout_from_env("x").exchange_root, timezone=zone), end="")
        return 0
    layout = layout_from_env(args.course_id)
    if command in ("fetch", "submit"):
        return _student(args, layout)
    if command in ("setup", "autograde", "export", "grades"):
        return _with_catalog(args, layout)
    return _teacher(args, layout)


def _teacher(args: argparse.Namespace, layout: Any) -> int:
    import coursehub.grading.assignments as assignments
    from coursehub.grading.layout import secure_course

    command = args.grading_command
    if layout.course_dir.is_dir():
        secure_course(layout)  # every command corrects an older installation's modes
    if command == "add":
        print(f"added {assignments.add_assignment(layout, args.assignment, args.files)}")
    elif command == "generate":
        assignments.generate_assignment(layout, args.assignment)
        print(f"generated {args.assignment} in {layout.course_dir / 'release'}")
    elif command == "release":
        assignments.release_assignment(layout, args.assignment)
        print(f"released {args.assignment} of {layout.course_id}")
    elif command == "schedule":
        _schedule(args, layout)
    elif command == "collect":
        log = assignments.collect(layout, args.assignment, args.before_duedate)
        status = assignments.assignment_status(layout, args.assignment)
        print(f"collected: {', '.join(status.collected) or 'nothing'}")
        for skipped in assignments.skipped_submissions(log):
            print(f"skipped: {skipped}")
    elif command == "feedback":
        assignments.generate_feedback(layout, args.assignment)
        assignments.release_feedback(layout, args.assignment)
        print(f"feedback of {args.assignment} released")
    elif command == "status":
        status = assignments.assignment_status(layout, args.assignment)
        print(f"{'due':<11} {_due_line(layout, args.assignment)}")
        for field in ("generated", "released", "fetched", "submitted", "collected", "autograded"):
            value = getattr(status, field)
            print(f"{field:<11} {', '.join(value) if isinstance(value, tuple) else value}")
    return 0


def _grades(session: Any, args: argparse.Namespace, layout: Any) -> int:
    """``export`` and ``grades``: the gradebook joined with the course's roster in the catalog."""
    import coursehub.grading.export as export
    from coursehub.catalog.courses import get_course
    from coursehub.grading.gradebook import read_roster
    from coursehub.grading.layout import secure_course

    if layout.course_dir.is_dir():
        secure_course(layout)
    roster = read_roster(session, get_course(session, args.course_id))
    if args.grading_command == "export":
        print(f"wrote {export.export_grades_csv(layout, args.output, roster=roster)}")
    else:
        print(export.render_grade_table(export.read_grade_table(layout, roster)))
    return 0


def _schedule(args: argparse.Namespace, layout: Any) -> None:
    """Set the due date and policy of ``args.assignment``; print them and the penalties changed."""
    from coursehub.errors import UsageError
    from coursehub.grading.assignments import list_assignments
    from coursehub.grading.create import parse_duedate, set_schedule
    from coursehub.grading.deadline import default_timezone
    from coursehub.grading.latepolicy import parse_late_policy

    if args.assignment not in list_assignments(layout):
        raise UsageError(f"assignment {args.assignment} not found in course {layout.course_id}")
    zone = args.timezone or default_timezone()
    duedate = parse_duedate(args.due, zone)
    policy = parse_late_policy(args.late, args.points_per_hour, args.after_due)
    changes = set_schedule(layout, args.assignment, duedate, policy, zone)
    print(f"{args.assignment}: due {_due_line(layout, args.assignment)}")
    for change in changes:
        print(f"late penalty of {change.student_id}: {change.before:g} -> {change.after:g}")


def _due_line(layout: Any, assignment: str) -> str:
    """``2025-03-30 23:59 CEST (Europe/Paris); score 0 when late`` from the published deadline."""
    from coursehub.grading.deadline import read_published

    deadline = read_published(layout.exchange_root, layout.course_id).get(assignment)
    if deadline is None:
        return "not published yet (no due date)"
    return f"{deadline.shown()}; {deadline.policy}"


def _with_catalog(args: argparse.Namespace, layout: Any) -> int:
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.grading.autograde.outcomes import HOST_ERROR, render_outcomes
    from coursehub.grading.autograde.progress import progress_bar, sigterm_interrupts
    from coursehub.grading.course import autograde_course_assignment, setup_course

    try:
        with open_catalog() as engine, session_scope(engine) as session:
            if args.grading_command in ("export", "grades"):
                return _grades(session, args, layout)
            if args.grading_command == "setup":
                plan = setup_course(session, args.course_id, layout)
                print(
                    f"course {args.course_id} ready in {layout.course_dir}; gradebook: "
                    f"{plan.summary()}"
                )
                return 0
            with progress_bar(args.assignment) as on_progress, sigterm_interrupts():
                outcomes = autograde_course_assignment(
                    session,
                    args.course_id,
                    layout,
                    args.assignment,
                    args.timeout,
                    parallel=args.parallel,
                    force=args.force,
                    on_progress=on_progress,
                    worker=args.worker,
                )
    except KeyboardInterrupt:
        print(
            f"coursehub: autograde of {args.assignment} interrupted; the submissions graded so "
            "far are kept: run the same command again to continue",
            file=sys.stderr,
        )
        return 130
    print(render_outcomes(args.assignment, outcomes))
    host = [o.student_id for o in outcomes if o.status == HOST_ERROR]
    if host:
        print(
            f"coursehub: {len(host)} submission(s) of {args.assignment} not graded for a host "
            f"reason ({', '.join(host[:5])}{', ...' if len(host) > 5 else ''}): see the messages "
            "above, fix the cause and run the same command again",
            file=sys.stderr,
        )
        return 1
    return 0


def _positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _student(args: argparse.Namespace, layout: Any) -> int:
    from coursehub.grading.exchange import current_student, fetch_assignment, submit_assignment

    student = current_student(args.student)
    args.dir = Path.cwd() if args.dir is None else args.dir
    if args.grading_command == "fetch":
        path = fetch_assignment(
            layout.exchange_root, layout.course_id, args.assignment, student, args.dir
        )
        print(f"fetched into {path}")
        print(f"due {_due_line(layout, args.assignment)}")
    else:
        note = submit_assignment(
            layout.exchange_root, layout.course_id, args.assignment, student, args.dir
        )
        print(f"submitted {args.assignment} of {layout.course_id} as {student}")
        if note:
            print(note)
    return 0


def _grader_user() -> int:
    """Create (as root) the sandbox account of :mod:`coursehub.sandbox`; print it."""
    from coursehub.sandbox.account import ensure_sandbox_account

    account = ensure_sandbox_account()
    print(f"sandbox account {account.name}: uid {account.uid}, gid {account.gid}")
    return 0
