"""``coursehub exam update``: change an exam's allowed imports, address ranges or start code.

::

    coursehub exam update mlmeca-2025 final --allowed-imports numpy,pandas [--by LEAD]
    coursehub exam update mlmeca-2025 final --start-code ''    # no code any more

Each option given replaces that setting (``''`` clears it); those left out are
kept (:func:`coursehub.catalog.examupdate.update_exam`). A student who starts
after the change meets the new code and address ranges; an exam server
started after it gets the new import list, a running kernel keeps its own. A
refusal is one line naming the option (status 2).
"""

from __future__ import annotations

import argparse

from coursehub.grading.examcommands import _recorder, cli_options, course_exam, exam_transaction


def add_update_arguments(sub: argparse.ArgumentParser) -> None:
    """Declare ``update``'s options on ``sub`` (the names of ``exam create``'s)."""
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--allowed-imports", metavar="NAMES", help="numpy,pandas ('' for no list)")
    sub.add_argument("--allowed-networks", metavar="CIDRS", help="192.0.2.0/24 ('' for anywhere)")
    sub.add_argument("--start-code", metavar="CODE", help="the new code ('' for none)")
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
    }
    if all(value is None for value in changes.values()):
        raise UsageError(
            "--allowed-imports: nothing to change: give --allowed-imports, "
            "--allowed-networks or --start-code"
        )
    with exam_transaction(args) as session:
        course, exam = course_exam(session, args)
        by = _recorder(session, course, args.by)
        done = update_exam(session, exam, changes)
        print(f"exam {exam.assignment} of {course.course_id}, by {by}: " + "; ".join(done))
    return 0
