"""The handlers of ``coursehub exam ...`` (:mod:`coursehub.grading.examcli`).

Each opens the catalog (:func:`coursehub.catalog.connect.open_catalog`), works
in one transaction, prints, and returns the exit status; a refusal is a
:class:`coursehub.errors.UsageError` (one line naming the field, status 2).
The bell (:func:`bell`) submits, one after the other, the saved work of every
student whose time is up and who has no bell submission yet, and records
each receipt as it goes (a student whose work cannot be submitted is named,
the others still are).
"""

from __future__ import annotations

import argparse
import functools
import getpass
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError, UsageError


@contextmanager
def exam_transaction(args: argparse.Namespace) -> Iterator[Any]:
    """Yield a session on the checked catalog; commit if the block succeeds, else roll back."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_factory

    with open_catalog(args.database_url) as engine, session_factory(engine)() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def course_exam(session: Any, args: argparse.Namespace) -> tuple[Any, Any]:
    """Return the course ``args.course_id`` and its exam ``args.assignment`` (NotFoundError)."""
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.exams import get_exam

    course = get_course(session, args.course_id)
    return course, get_exam(session, course, args.assignment)


#: The JSON field a refusal names (:mod:`coursehub.catalog.examjson`) -> the option to name.
OPTION_OF = {
    "assignment": "ASSIGNMENT",
    "opens_at": "--opens",
    "duration": "--duration",
    "duration_min": "--duration",
    "hard_end": "--hard-end",
    "timezone": "--timezone",
    "start_code": "--start-code",
    "allowed_imports": "--allowed-imports",
    "allowed_networks": "--allowed-networks",
    "warn_before_min": "--warn-before",
    "fullscreen": "--fullscreen",
    "by": "--by",
    "extra_minutes": "--extra-minutes",
    "extra_percent": "--extra-percent",
    "username": "--student",
    "group": "--group",
    "minutes": "--minutes",
    "release_at": "--at",
}


def cli_options(
    handler: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """Wrap a handler so that a refusal naming a JSON field names the command-line option."""

    @functools.wraps(handler)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except UsageError as exc:
            head, sep, rest = str(exc).partition(": ")
            if not sep or head not in OPTION_OF:
                raise
            raise UsageError(f"{OPTION_OF[head]}: {rest}") from None

    return wrapped


def _recorder(session: Any, course: Any, by: str | None) -> str:
    """Who records a change: ``--by`` (a lead of the course), else the account running this."""
    from coursehub.catalog.examoverrides import check_lead

    return check_lead(session, course, by) if by else getpass.getuser()


def print_warnings(warnings: list[str]) -> None:
    """Print each warning as one ``warning: ...`` line on the standard error."""
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)


@cli_options
def create(args: argparse.Namespace) -> int:
    """``coursehub exam create``: make an assignment an exam; print it and any warning."""
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.examjson import window_from_fields
    from coursehub.catalog.exams import create_exam, describe_exam
    from coursehub.catalog.examtime import window_warnings
    from coursehub.grading.deadline import default_timezone

    fields = {
        "opens_at": args.opens,
        "duration_min": args.duration,
        "hard_end": args.hard_end,
        "timezone": args.timezone,
    }
    window = window_from_fields(fields, default_timezone())
    with exam_transaction(args) as session:
        course = get_course(session, args.course_id)
        by = _recorder(session, course, args.by)
        exam = create_exam(
            session,
            course,
            args.assignment,
            window,
            by,
            args.start_code,
            allowed_imports=args.allowed_imports,
            allowed_networks=args.allowed_networks,
            warn_before_min=args.warn_before,
            fullscreen=args.fullscreen,
        )
        print(f"course {course.course_id}: exam {describe_exam(exam)}")
    from coursehub.grading.layout import assignment_warnings, layout_from_env

    found = assignment_warnings(layout_from_env(args.course_id), args.assignment)
    print_warnings(window_warnings(window, datetime.now(UTC)) + found)
    return 0


def list_(args: argparse.Namespace) -> int:
    """``coursehub exam list``: the course's exams, one a line (or JSON)."""
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.examjson import exam_to_json
    from coursehub.catalog.exams import describe_exam, list_exams

    with exam_transaction(args) as session:
        course = get_course(session, args.course_id)
        exams = list_exams(session, course)
        if args.json:
            print(json.dumps([exam_to_json(e, course.course_id) for e in exams], indent=2))
            return 0
        for exam in exams:
            print(describe_exam(exam))
        if not exams:
            print(f"course {course.course_id} has no exam")
    return 0


def show(args: argparse.Namespace) -> int:
    """``coursehub exam show``: the exam and every student's sitting (the proctor's table)."""
    from coursehub.catalog.examjson import exam_to_json, sitting_to_json
    from coursehub.catalog.exams import describe_exam, list_sittings
    from coursehub.catalog.examtime import format_moment

    now = datetime.now(UTC)
    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        sittings = list_sittings(session, course, exam)
        if args.json:
            value = exam_to_json(exam, course.course_id)
            value["sittings"] = [sitting_to_json(s, now) for s in sittings]
            print(json.dumps(value, indent=2))
            return 0
        print(describe_exam(exam))
        for s in sittings:
            if s.started_at is None or s.ends_at is None:
                state = "not started"
            else:
                left = s.seconds_left(now) or 0
                state = (
                    f"started {format_moment(s.started_at, exam.timezone)}, "
                    f"ends {format_moment(s.ends_at, exam.timezone)}, {left / 60:.0f} min left"
                )
            submitted = "" if s.submitted_at is None else f", last submit {s.submitted_at:%H:%M:%S}"
            final = ", submitted at the bell" if s.final else ""
            print(f"  {s.username}: {state} ({s.allowance.describe()}){submitted}{final}")
    return 0


@cli_options
def override(args: argparse.Namespace) -> int:
    """``coursehub exam override``: extra time (or another window) for a student or a group.

    Prints the override, the one it replaces (if any), and any warning.
    """
    from coursehub.catalog.examjson import allowance_from_fields
    from coursehub.catalog.examoverrides import override_of, set_override
    from coursehub.catalog.exams import window_of
    from coursehub.catalog.examtime import window_warnings

    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        fields = {
            "extra_minutes": args.extra_minutes,
            "extra_percent": args.extra_percent,
            "opens_at": args.opens,
            "hard_end": args.hard_end,
        }
        allowance = allowance_from_fields(fields, exam.timezone)
        target = {"username": args.student, "group": args.group}
        by = _recorder(session, course, args.by)
        previous = override_of(session, course, exam, **target)
        set_override(session, course, exam, allowance, by, **target)
        who = f"student {args.student}" if args.student else f"group {args.group}"
        print(
            f"exam {exam.assignment} of {course.course_id}: {who}: "
            f"{allowance.describe(exam.timezone)}"
        )
        if previous is not None:
            print(f"  replaces the earlier override: {previous.describe(exam.timezone)}")
        print_warnings(window_warnings(window_of(exam), datetime.now(UTC), allowance))
    return 0


@cli_options
def start(args: argparse.Namespace) -> int:
    """``coursehub exam start``: record a student's start now; print their end."""
    from coursehub.catalog.examcodes import WrongStartCodeError
    from coursehub.catalog.examproctor import count_wrong_code
    from coursehub.catalog.exams import start_exam
    from coursehub.catalog.examtime import format_moment

    moment = datetime.now(UTC)
    try:
        with exam_transaction(args) as session:
            course, exam = course_exam(session, args)
            sitting = start_exam(session, course, exam, args.student, moment, args.code)
            assert sitting.started_at is not None and sitting.ends_at is not None
            print(
                f"{sitting.username} started {exam.assignment} at "
                f"{format_moment(sitting.started_at, exam.timezone)}; "
                f"ends {format_moment(sitting.ends_at, exam.timezone)}"
            )
    except WrongStartCodeError:
        with exam_transaction(args) as session:  # counted, although the start is rolled back
            course, exam = course_exam(session, args)
            count_wrong_code(session, course, exam, args.student, moment)
        raise
    return 0


@cli_options
def end(args: argparse.Namespace) -> int:
    """``coursehub exam end``: end a student's time now (the bell then submits their work)."""
    from coursehub.catalog.examproctor import end_sitting
    from coursehub.catalog.examtime import format_moment

    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        by = _recorder(session, course, args.by)
        sitting = end_sitting(session, course, exam, args.student, by, datetime.now(UTC))
        assert sitting.ends_at is not None
        print(
            f"{sitting.username}'s time on {exam.assignment} ended at "
            f"{format_moment(sitting.ends_at, exam.timezone)} (by {by}); "
            "the bell submits their work"
        )
    return 0


@cli_options
def addtime(args: argparse.Namespace) -> int:
    """``coursehub exam add-time``: give a student who started minutes more (capped)."""
    from coursehub.catalog.examjson import integer_field
    from coursehub.catalog.exams import add_time
    from coursehub.catalog.examtime import format_moment

    minutes = integer_field({"minutes": args.minutes}, "minutes")
    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        sitting = add_time(session, course, exam, args.student, minutes)
        assert sitting.ends_at is not None
        print(f"{sitting.username} now ends {format_moment(sitting.ends_at, exam.timezone)}")
    return 0


def _print_receipt(username: str, receipt: Any, timezone: str) -> None:
    from coursehub.catalog.examtime import format_moment

    when = format_moment(receipt.submitted_at, timezone)
    print(f"{username}: submitted {receipt.submission} at {when}, SHA-256 {receipt.sha256}")
    for name, digest in sorted(receipt.files.items()):
        print(f"  {digest}  {name}")


@cli_options
def submit(args: argparse.Namespace) -> int:
    """``coursehub exam submit``: submit a student's saved work (refused after their end)."""
    from coursehub.catalog.exams import record_receipt, sitting_of
    from coursehub.grading.examsubmit import submit_exam
    from coursehub.grading.layout import layout_from_env

    layout = layout_from_env(args.course_id)
    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        sitting = sitting_of(session, course, exam, args.student)
        now = datetime.now(UTC)
        receipt = submit_exam(
            layout, exam.assignment, sitting, args.work_dir, now, exam.timezone, args.bell
        )
        record_receipt(session, course, exam, sitting.username, receipt, args.bell)
        _print_receipt(sitting.username, receipt, exam.timezone)
    return 0


@cli_options
def bell(args: argparse.Namespace) -> int:
    """``coursehub exam bell``: submit the work of each student whose time is up (1: one failed).

    Then the hub stops the exam server of each student submitted
    (:func:`coursehub.grading.bellstop.stop_exam_servers`, best effort).
    """
    from coursehub.catalog.exams import list_sittings, record_receipt
    from coursehub.grading.bellstop import stop_exam_servers
    from coursehub.grading.examsubmit import submit_exam
    from coursehub.grading.layout import layout_from_env

    if "{student}" not in args.work_dir:
        raise UsageError(
            f"--work-dir: {args.work_dir!r} has no {{student}}: every student's work would be "
            "the same folder (e.g. '/home/{student}')"
        )
    layout = layout_from_env(args.course_id)
    failed, submitted = 0, []
    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        now = datetime.now(UTC)
        due = [
            s
            for s in list_sittings(session, course, exam)
            if s.ends_at is not None and s.ends_at <= now and not s.final
        ]
        for sitting in due:
            work_dir = Path(args.work_dir.replace("{student}", sitting.username))
            try:
                receipt = submit_exam(
                    layout, exam.assignment, sitting, work_dir, now, exam.timezone, bell=True
                )
            except (CoursehubError, OSError) as exc:  # one student's failure stops no other
                failed += 1
                print(f"{sitting.username}: not submitted: {exc}")
                continue
            record_receipt(session, course, exam, sitting.username, receipt, final=True)
            _print_receipt(sitting.username, receipt, exam.timezone)
            submitted.append(sitting.username)
        print(f"bell of {exam.assignment}: {len(due) - failed} submitted, {failed} failed")
    for line in stop_exam_servers(submitted, args.hub_url, args.token_env):
        print(line)
    return 1 if failed else 0


@cli_options
def collect(args: argparse.Namespace) -> int:
    """``coursehub exam collect``: each student's receipted submission; print what was skipped.

    Returns 1 when no student has a receipt (nothing collected), or when a
    receipted submission was skipped (its checks failed); 0 otherwise.
    """
    from coursehub.catalog.exams import list_sittings
    from coursehub.grading.examcollect import collect_exam
    from coursehub.grading.layout import layout_from_env

    layout = layout_from_env(args.course_id)
    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        receipts = {s.username: s.submission for s in list_sittings(session, course, exam)}
    kept = {student: name for student, name in receipts.items() if name}
    skipped = collect_exam(layout, exam.assignment, kept)
    print(f"exam {exam.assignment} of {layout.course_id}: {len(kept)} student(s) with a receipt")
    for line in skipped:
        print(f"  skipped {line}")
    lost = sorted(s for s, name in kept.items() if any(name in line for line in skipped))
    if not kept:
        print(
            f"nothing collected: no student has a receipt for {exam.assignment} "
            "(nobody submitted through the exam; see `coursehub exam show`)",
            file=sys.stderr,
        )
    elif lost:
        print(f"receipted but not collected: {', '.join(lost)}", file=sys.stderr)
    return 1 if not kept or lost else 0
