"""``coursehub exam update``: change an exam's allowed imports, address ranges, start code or
clock settings.

::

    coursehub exam update mlmeca-2025 final --allowed-imports numpy,pandas [--by LEAD]
    coursehub exam update mlmeca-2025 final --start-code ''    # no code any more
    coursehub exam update mlmeca-2025 final --warn-before 10 --fullscreen required

Each option given replaces that setting (``''`` clears it); those left out are
kept (:func:`coursehub.catalog.examupdate.update_exam`). A student who starts
after the change meets the new code and address ranges; an exam server
started after it gets the new import list, a running kernel keeps its own; a
running exam clock takes the new warning time and full-screen rule at its
next poll (:mod:`coursehub.catalog.examsettings`). A refusal is one line
naming the option (status 2), and nothing is changed.
"""

from __future__ import annotations

import argparse

from coursehub.grading.examcommands import _recorder, cli_options, course_exam, exam_transaction


def add_clock_arguments(sub: argparse.ArgumentParser) -> None:
    """Declare ``--warn-before MIN`` and ``--fullscreen offered|required`` (create, update)."""
    sub.add_argument(
        "--warn-before",
        metavar="MIN",
        help="minutes before a student's end when the exam clock warns (default 5; 0: none)",
    )
    sub.add_argument(
        "--fullscreen",
        metavar="offered|required",
        help="offered: a button (default); required: the workspace is covered until full screen",
    )


def add_update_arguments(sub: argparse.ArgumentParser) -> None:
    """Declare ``update``'s options on ``sub`` (the names of ``exam create``'s)."""
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--allowed-imports", metavar="NAMES", help="numpy,pandas ('' for no list)")
    sub.add_argument("--allowed-networks", metavar="CIDRS", help="192.0.2.0/24 ('' for anywhere)")
    sub.add_argument("--start-code", metavar="CODE", help="the new code ('' for none)")
    add_clock_arguments(sub)
    sub.add_argument("--by", metavar="USER", help="a lead of the course (default: you)")


@cli_options
def update(args: argparse.Namespace) -> int:
    """``coursehub exam update``: print what changed."""
    from coursehub.catalog.examupdate import update_exam
    from coursehub.errors import UsageError

    changes = {
        "allowed_imports": args.allowed_imports,
        "allowed_networks": args.allowed_networks,
        "start_code": args.start_code,
        "warn_before_min": args.warn_before,
        "fullscreen": args.fullscreen,
    }
    if all(value is None for value in changes.values()):
        raise UsageError(
            "--allowed-imports: nothing to change: give --allowed-imports, "
            "--allowed-networks, --start-code, --warn-before or --fullscreen"
        )
    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        by = _recorder(session, course, args.by)
        done = update_exam(session, exam, changes)
        print(f"exam {exam.assignment} of {course.course_id}, by {by}: " + "; ".join(done))
    return 0
