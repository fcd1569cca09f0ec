"""The student's side of the exchange: fetch and submit, and the fetch class that records fetches.

nbgrader's exchange names a submission after ``CourseDirectory.student_id``
when it is set (else after the Unix user). On the hub each student has a
server of their own and nbgrader finds their name; the functions below take
the student id explicitly, which is also how several students are
simulated under one Unix user (the demo, the tests).

:class:`RecordingFetchAssignment` is nbgrader's default fetch plus a marker
``<exchange>/<course_id>/fetched/<student>+<assignment>`` (an empty file in a
write-only directory), so that the course page can say who fetched. It is
enabled in the servers' global config
(:func:`coursehub.grading.layout.render_student_config`).
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any

from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default.fetch_assignment import ExchangeFetchAssignment

from coursehub.errors import CoursehubError
from coursehub.grading.layout import check_name


class RecordingFetchAssignment(ExchangeFetchAssignment):
    """nbgrader's fetch, then a fetch record in the course's ``fetched`` directory."""

    def copy_files(self) -> None:
        super().copy_files()
        record_fetch(Path(self.root), self.coursedir.course_id, self.coursedir.assignment_id,
                     self.coursedir.student_id)  # fmt: skip


def record_fetch(exchange_root: Path, course_id: str, assignment: str, student_id: str) -> None:
    """Leave the marker ``fetched/<student>+<assignment>``; a missing directory is skipped."""
    student = student_id if student_id not in ("", "*") else getpass.getuser()
    directory = exchange_root / course_id / "fetched"
    if directory.is_dir():
        (directory / f"{student}+{assignment}").touch(exist_ok=True)


def _exchange_config(
    exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> Any:
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.course_id = course_id
    config.CourseDirectory.assignment_id = assignment
    config.CourseDirectory.student_id = student_id
    config.Exchange.root = str(exchange_root)
    config.Exchange.path_includes_course = True
    config.Exchange.assignment_dir = str(work_dir)
    config.Exchange.cache = str(work_dir / ".nbgrader_cache")
    return config


def _run(kind: str, exchange_root: Path, course_id: str, assignment: str, student_id: str,
         work_dir: Path) -> None:  # fmt: skip
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeFactory

    check_name(student_id, "student id")
    check_name(assignment, "assignment name")
    config = _exchange_config(exchange_root, course_id, assignment, student_id, work_dir)
    if kind == "fetch":
        config.ExchangeFactory.fetch_assignment = RecordingFetchAssignment
    factory = ExchangeFactory(config=config)
    make = factory.FetchAssignment if kind == "fetch" else factory.Submit
    app = make(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config),
        config=config,
    )
    cwd = os.getcwd()
    try:
        os.chdir(work_dir)  # nbgrader logs paths relative to the working directory
        app.start()
    except ExchangeError as exc:
        raise CoursehubError(
            f"{kind} of assignment {assignment} of course {course_id} by {student_id} failed: {exc}"
        ) from exc
    finally:
        os.chdir(cwd)


def fetch_assignment(
    exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> Path:
    """Fetch a released assignment into ``work_dir/<course_id>/<assignment>``; return that path.

    Raises
    ------
    CoursehubError
        Naming the assignment, the course and the student: not released,
        already fetched, exchange unreadable.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    _run("fetch", exchange_root, course_id, assignment, student_id, work_dir)
    return work_dir / course_id / assignment


def submit_assignment(
    exchange_root: Path, course_id: str, assignment: str, student_id: str, work_dir: Path
) -> None:
    """Submit ``work_dir/<course_id>/<assignment>`` as ``student_id`` to the course's inbound.

    Raises
    ------
    CoursehubError
        Naming the assignment, the course and the student: nothing to
        submit, not released, inbound missing or not writable.
    """
    _run("submit", exchange_root, course_id, assignment, student_id, work_dir)
