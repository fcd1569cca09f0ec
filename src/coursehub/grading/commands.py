"""The handlers of ``coursehub grading ...``: one function per verb, each taking the namespace.

:mod:`coursehub.grading.cli` builds the parser and names each verb's handler here
(``set_defaults(func=...)``). Each handler imports what it needs when it runs, so
building the parser loads nothing heavy.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def hub_config(args: argparse.Namespace) -> int:
    """``hub-config``: print one formgrader service per course (as root: their accounts)."""
    from coursehub.contract import hub_id_of_data_dir
    from coursehub.grading.formgrader.account import prepare_formgraders
    from coursehub.grading.formgrader.service import full_server_enabled, render_formgrader_config
    from coursehub.grading.layout import layout_from_env

    layouts = [layout_from_env(c) for c in args.course_ids]
    hub_id = hub_id_of_data_dir(args.hub_data_dir)
    accounts = prepare_formgraders(layouts, hub_id)  # as root: one account per course
    text = render_formgrader_config(layouts, full_server=full_server_enabled(), accounts=accounts)
    print(text, end="")
    return 0


def student_config(args: argparse.Namespace) -> int:
    """``student-config``: print the servers' global ``nbgrader_config.py``."""
    from coursehub.grading.deadline import default_timezone, zone_of
    from coursehub.grading.layout import layout_from_env
    from coursehub.grading.studentconfig import render_student_config

    zone = zone_of(default_timezone()).key  # an unknown zone is refused here
    print(render_student_config(layout_from_env("x").exchange_root, timezone=zone), end="")
    return 0


def _course_layout(args: argparse.Namespace, secure: bool = True) -> Any:
    """The layout of ``args.course_id``; an existing course folder gets its modes corrected."""
    from coursehub.grading.layout import layout_from_env, secure_course

    layout = layout_from_env(args.course_id)
    if secure and layout.course_dir.is_dir():
        secure_course(layout)  # every command corrects an older installation's modes
    return layout


def add(args: argparse.Namespace) -> int:
    """``add``: add an assignment from source notebooks."""
    from coursehub.grading.assignments import add_assignment

    print(f"added {add_assignment(_course_layout(args), args.assignment, args.files)}")
    return 0


def generate(args: argparse.Namespace) -> int:
    """``generate``: make the student version."""
    from coursehub.grading.assignments import generate_assignment
    from coursehub.grading.limits import large_shipped_files

    layout = _course_layout(args)
    generate_assignment(layout, args.assignment)
    print(f"generated {args.assignment} in {layout.course_dir / 'release'}")
    for line in large_shipped_files(layout.course_dir / "source" / args.assignment):
        print(f"warning: {args.assignment}: {line}", file=sys.stderr)
    return 0


def release(args: argparse.Namespace) -> int:
    """``release``: release to the exchange."""
    from coursehub.grading.assignments import release_assignment

    layout = _course_layout(args)
    release_assignment(layout, args.assignment)
    print(f"released {args.assignment} of {layout.course_id}")
    return 0


def collect(args: argparse.Namespace) -> int:
    """``collect``: collect the newest submissions; print who and what was skipped."""
    import coursehub.grading.assignments as assignments

    layout = _course_layout(args)
    log = assignments.collect(layout, args.assignment, args.before_duedate)
    status = assignments.assignment_status(layout, args.assignment)
    print(f"collected: {', '.join(status.collected) or 'nothing'}")
    for skipped in assignments.skipped_submissions(log):
        print(f"skipped: {skipped}")
    return 0


def feedback(args: argparse.Namespace) -> int:
    """``feedback``: generate and release feedback."""
    from coursehub.grading.assignments import generate_feedback, release_feedback

    layout = _course_layout(args)
    generate_feedback(layout, args.assignment)
    release_feedback(layout, args.assignment)
    print(f"feedback of {args.assignment} released")
    return 0


def status(args: argparse.Namespace) -> int:
    """``status``: the due date and who reached each step."""
    from coursehub.grading.assignments import assignment_status

    layout = _course_layout(args)
    status = assignment_status(layout, args.assignment)
    print(f"{'due':<11} {_due_line(layout, args.assignment)}")
    for field in ("generated", "released", "fetched", "submitted", "collected", "autograded"):
        value = getattr(status, field)
        print(f"{field:<11} {', '.join(value) if isinstance(value, tuple) else value}")
    return 0


def export(args: argparse.Namespace) -> int:
    """``export``: nbgrader's CSV, the gradebook joined with the course's roster in the catalog."""
    from coursehub.grading.export import export_grades_csv

    layout = _course_layout(args)
    with _catalog_session() as session:
        roster = _read_roster(session, args.course_id)
        print(f"wrote {export_grades_csv(layout, args.output, roster=roster)}")
    return 0


def grade_table(args: argparse.Namespace) -> int:
    """``grades``: the grade table, the gradebook joined with the course's roster."""
    from coursehub.grading.export import read_grade_table, render_grade_table

    layout = _course_layout(args)
    with _catalog_session() as session:
        roster = _read_roster(session, args.course_id)
        print(render_grade_table(read_grade_table(layout, roster)))
    return 0


def _read_roster(session: Any, course_id: str) -> Any:
    """The course's roster from the catalog."""
    from coursehub.catalog.courses import get_course
    from coursehub.grading.gradebook import read_roster

    return read_roster(session, get_course(session, course_id))


@contextmanager
def _catalog_session() -> Iterator[Any]:
    """A session on the catalog (opened with its schema check), committed on success."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope

    with open_catalog() as engine, session_scope(engine) as session:
        yield session


def schedule(args: argparse.Namespace) -> int:
    """Set the due date and policy of ``args.assignment``; print them and the penalties changed."""
    from coursehub.errors import UsageError
    from coursehub.grading.assignments import list_assignments
    from coursehub.grading.create import parse_duedate, set_schedule
    from coursehub.grading.deadline import default_timezone
    from coursehub.grading.latepolicy import parse_late_policy

    layout = _course_layout(args)
    if args.assignment not in list_assignments(layout):
        raise UsageError(f"assignment {args.assignment} not found in course {layout.course_id}")
    zone = args.timezone or default_timezone()
    duedate = parse_duedate(args.due, zone)
    policy = parse_late_policy(args.late, args.points_per_hour, args.after_due)
    changes = set_schedule(layout, args.assignment, duedate, policy, zone)
    print(f"{args.assignment}: due {_due_line(layout, args.assignment)}")
    for change in changes:
        print(f"late penalty of {change.student_id}: {change.before:g} -> {change.after:g}")
    return 0


def _due_line(layout: Any, assignment: str) -> str:
    """``2025-03-30 23:59 CEST (Europe/Paris); score 0 when late`` from the published deadline."""
    from coursehub.grading.deadline import read_published

    deadline = read_published(layout.exchange_root, layout.course_id).get(assignment)
    if deadline is None:
        return "not published yet (no due date)"
    return f"{deadline.shown()}; {deadline.policy}"


def setup(args: argparse.Namespace) -> int:
    """``setup``: the course's nbgrader folders and its gradebook synced with the catalog."""
    from coursehub.grading.course import setup_course

    layout = _course_layout(args, secure=False)
    with _catalog_session() as session:
        plan = setup_course(session, args.course_id, layout)
        print(f"course {args.course_id} ready in {layout.course_dir}; gradebook: {plan.summary()}")
    return 0


def autograde(args: argparse.Namespace) -> int:
    """``autograde``: grade the collected submissions; 1 when some failed for a host reason."""
    from coursehub.grading.autograde.outcomes import HOST_ERROR, render_outcomes
    from coursehub.grading.autograde.progress import progress_bar, sigterm_interrupts
    from coursehub.grading.course import autograde_course_assignment

    layout = _course_layout(args, secure=False)
    try:
        with (
            _catalog_session() as session,
            progress_bar(args.assignment) as on_progress,
            sigterm_interrupts(),
        ):
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


def fetch(args: argparse.Namespace) -> int:
    """``fetch``: a student fetches an assignment into ``--dir``."""
    from coursehub.grading.exchange import current_student, fetch_assignment

    layout = _course_layout(args, secure=False)
    student = current_student(args.student)
    folder = Path.cwd() if args.dir is None else args.dir
    path = fetch_assignment(
        layout.exchange_root, layout.course_id, args.assignment, student, folder
    )
    print(f"fetched into {path}")
    print(f"due {_due_line(layout, args.assignment)}")
    return 0


def submit(args: argparse.Namespace) -> int:
    """``submit``: a student submits an assignment from ``--dir``."""
    from coursehub.grading.exchange import current_student, submit_assignment

    layout = _course_layout(args, secure=False)
    student = current_student(args.student)
    folder = Path.cwd() if args.dir is None else args.dir
    note = submit_assignment(
        layout.exchange_root, layout.course_id, args.assignment, student, folder
    )
    print(f"submitted {args.assignment} of {layout.course_id} as {student}")
    if note:
        print(note)
    return 0


def grader_user(args: argparse.Namespace) -> int:
    """Create (as root) the sandbox account of :mod:`coursehub.sandbox`; print it."""
    from coursehub.sandbox.account import ensure_sandbox_account

    account = ensure_sandbox_account()
    print(f"sandbox account {account.name}: uid {account.uid}, gid {account.gid}")
    return 0
