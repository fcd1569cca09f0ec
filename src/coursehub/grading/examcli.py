"""``coursehub exam ...``: timed exams of a course, from the command line.

::

    coursehub exam create mlmeca-2025 final --opens 2026-01-12T10:00 --duration 120 \\
        --hard-end 2026-01-12T13:00 [--timezone Europe/Paris] [--start-code K7Q2] \\
        [--allowed-imports numpy,pandas]
    coursehub exam list mlmeca-2025
    coursehub exam show mlmeca-2025 final            # the exam and every student's sitting
    coursehub exam override mlmeca-2025 final --student p2500001 --extra-percent 33
    coursehub exam override mlmeca-2025 final --group G2 --opens 2026-01-13T10:00 \\
        --hard-end 2026-01-13T13:00                 # a conflict slot
    coursehub exam start mlmeca-2025 final --student p2500001 [--code K7Q2]
    coursehub exam add-time mlmeca-2025 final --student p2500001 --minutes 10
    coursehub exam end mlmeca-2025 final --student p2500001   # time up now; the bell submits
    coursehub exam reopen mlmeca-2025 final --student p2500001  # exam server again, same end
    coursehub exam submit mlmeca-2025 final --student p2500001 --work-dir /home/p2500001
    coursehub exam bell mlmeca-2025 final --work-dir '/home/{student}'
    coursehub exam collect mlmeca-2025 final        # each student's receipted submission
    coursehub exam similarity mlmeca-2025 final [--threshold 80] [--html FILE]
    coursehub exam release mlmeca-2025 final --at 2026-01-19T08:00   # scores and feedback
    coursehub exam release-due mlmeca-2025          # from a timer: release what is due
    coursehub exam snapshot mlmeca-2025 final       # copy every exam home (root, each minute)

Run by the course's team on the server (the catalog's database and the
course's grading folders, ``COURSEHUB_GRADING_*``). Bad input is one line
naming the option's field. The handlers: :mod:`coursehub.grading.examcommands`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coursehub.catalog.cli import add_database_url
from coursehub.examroom.home import DEFAULT_EXAM_ROOT, DEFAULT_STORE
from coursehub.grading import (
    examcommands,
    examrelease,
    reopencommand,
    similaritycommand,
    snapshotcommand,
    updatecommand,
)


def _command(commands: Any, name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = commands.add_parser(name, help=help_text, description=help_text)
    sub.add_argument("course_id", metavar="COURSE_ID")
    add_database_url(sub)
    sub.set_defaults(func=func)
    return sub


def register(subparsers: Any) -> None:
    """Add ``coursehub exam`` and its sub-commands to ``subparsers``."""
    parser = subparsers.add_parser(
        "exam", help="timed exams: create, overrides, start, submit at the bell (docs/exams.md)"
    )
    commands = parser.add_subparsers(dest="exam_command", metavar="COMMAND", required=True)
    sub = _command(commands, "create", "make an assignment a timed exam", examcommands.create)
    sub.add_argument("assignment", metavar="ASSIGNMENT", help="the nbgrader assignment")
    sub.add_argument("--opens", required=True, metavar="TIME", help="e.g. 2026-01-12T10:00")
    sub.add_argument("--duration", required=True, metavar="MIN", help="minutes per student")
    sub.add_argument("--hard-end", required=True, metavar="TIME", help="nobody works after it")
    sub.add_argument("--timezone", metavar="ZONE", help="default: the course's due-date zone")
    sub.add_argument("--start-code", metavar="CODE", help="a code announced in the room")
    sub.add_argument(
        "--allowed-imports", metavar="NAMES", help="modules the kernel may import: numpy,pandas"
    )
    sub.add_argument(
        "--allowed-networks",
        metavar="CIDRS",
        help="address ranges students may start it from: 192.0.2.0/24,2001:db8::/32",
    )
    updatecommand.add_clock_arguments(sub)
    sub.add_argument("--by", metavar="USER", help="who creates it (default: you)")
    sub = _command(
        commands,
        "update",
        "change an exam's allowed imports, address ranges, start code ('' clears one) or clock",
        updatecommand.update,
    )
    updatecommand.add_update_arguments(sub)
    sub = _command(commands, "list", "list the course's exams", examcommands.list_)
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub = _command(commands, "show", "an exam and each student's sitting", examcommands.show)
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--json", action="store_true", help="print JSON")
    sub = _command(
        commands, "override", "extra time for a student or a group", examcommands.override
    )
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    target = sub.add_mutually_exclusive_group(required=True)
    target.add_argument("--student", metavar="USER")
    target.add_argument("--group", metavar="GROUP")
    sub.add_argument("--extra-minutes", default="0", metavar="MIN")
    sub.add_argument("--extra-percent", default="0", metavar="PCT", help="e.g. 33")
    sub.add_argument("--opens", metavar="TIME", help="own opening (a conflict slot)")
    sub.add_argument("--hard-end", metavar="TIME", help="own hard end (a conflict slot)")
    sub.add_argument("--by", metavar="USER", help="who sets it (default: you)")
    _add_student_commands(commands)


def _add_student_commands(commands: Any) -> None:
    """Add ``start``, ``add-time``, ``submit``, ``bell`` and ``collect``."""
    sub = _command(commands, "start", "start a student's time now", examcommands.start)
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--student", required=True, metavar="USER")
    sub.add_argument("--code", metavar="CODE", help="the start code, if the exam has one")
    sub = _command(commands, "end", "end a student's time now (the bell submits)", examcommands.end)
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--student", required=True, metavar="USER")
    sub.add_argument("--by", metavar="USER", help="a lead of the course (default: you)")
    sub = _command(
        commands,
        "reopen",
        "start a student's exam server again after a crash (same end)",
        reopencommand.reopen,
    )
    reopencommand.add_reopen_arguments(sub)
    sub = _command(commands, "add-time", "give a student minutes more, live", examcommands.addtime)
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--student", required=True, metavar="USER")
    sub.add_argument("--minutes", required=True, metavar="MIN")
    sub = _command(commands, "submit", "submit a student's saved work", examcommands.submit)
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument("--student", required=True, metavar="USER")
    sub.add_argument("--work-dir", required=True, type=Path, help="holds <course_id>/<assignment>/")
    sub.add_argument("--bell", action="store_true", help="the bell's submission (final)")
    sub = _command(
        commands, "bell", "submit the work of every student whose time is up", examcommands.bell
    )
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument(
        "--work-dir", required=True, metavar="PATTERN", help="a student's, {student} replaced"
    )
    sub.add_argument(
        "--hub-url", help="hub that stops the exam servers (default: $COURSEHUB_HUB_API_URL)"
    )
    sub.add_argument(
        "--token-env", metavar="VAR", help="environment variable holding the hub API token"
    )
    sub = _command(
        commands, "collect", "collect each student's receipted submission", examcommands.collect
    )
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub = _command(
        commands,
        "similarity",
        "pairs of students whose collected code is near-identical (names, spaces normalised)",
        similaritycommand.similarity,
    )
    sub.add_argument("assignment", metavar="ASSIGNMENT", help="any collected assignment")
    sub.add_argument(
        "--threshold",
        default="80",
        metavar="PCT",
        help="report a pair when each one's share found in the other is at least PCT %% (80)",
    )
    sub.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="the report with each pair's cells side by side "
        "(default: <course>/coursehub/similarity-<assignment>.html)",
    )
    sub = _command(
        commands, "snapshot", "copy every exam home to the snapshot store", snapshotcommand.snapshot
    )
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    sub.add_argument(
        "--homes",
        metavar="DIR",
        help=f"the exam root (default $COURSEHUB_EXAM_ROOT, {DEFAULT_EXAM_ROOT})",
    )
    sub.add_argument("--store", default=DEFAULT_STORE, metavar="DIR", help="root's copies")
    sub.add_argument(
        "--every", metavar="S", help="watch: again every S seconds, changed homes only"
    )
    sub = _command(
        commands, "release", "when the scores and feedback are released", examrelease.release
    )
    sub.add_argument("assignment", metavar="ASSIGNMENT")
    when = sub.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="TIME", help="e.g. 2026-01-19T08:00 (the exam's zone)")
    when.add_argument("--clear", action="store_true", help="release by hand instead")
    _command(
        commands,
        "release-due",
        "release each exam's feedback whose time has come (from a timer)",
        examrelease.release_due,
    )
