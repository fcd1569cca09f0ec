"""Grade passback: an assignment's nbgrader scores to the LMS gradebook, student by student.

:func:`apply_passback` reads the course's grade table
(:func:`coursehub.grading.export.read_grade_table`), picks the LMS link
whose launches carried the grade services claim
(:func:`coursehub.catalog.lti.ags.grade_services_of`), plans who gets a score
(:func:`plan_passback`, pure), then asks the platform for a token, finds or
creates the assignment's line item (label and ``resourceId`` the assignment's
name, ``scoreMaximum`` its nbgrader maximum) and posts one score per student
(:mod:`coursehub.lti.ags`).

Who gets what: a graded student gets nbgrader's score less its late penalty
(never below 0); a student who submitted and is not graded yet is skipped;
one who submitted nothing is skipped, or gets 0 when the teacher asks
(``zero_missing``); a student who never launched from that LMS (no LMS user
id, ``sub``) is skipped and named. Nothing is hidden: the report lists each
student as sent, skipped or failed, with why. A refused token or line item
stops before any score is sent (:class:`coursehub.lti.ags.PlatformRefusedError`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from coursehub.catalog.lti.ags import SCOPE_LINEITEM, SCOPE_SCORE, grade_services_of, subjects_of
from coursehub.catalog.models.courses import Course
from coursehub.catalog.models.lti import LtiGradeService
from coursehub.errors import CoursehubError
from coursehub.grading.export import GRADED, NOT_SUBMITTED, GradeTable
from coursehub.grading.layout import CourseLayout
from coursehub.lti.ags import (
    LineItem,
    find_or_create_line_item,
    post_score,
    render_score,
    request_token,
)
from coursehub.lti.keys import load_private_key, tool_key_path

SENT, SKIPPED, FAILED = "sent", "skipped", "failed"
#: Scopes passback asks the platform for (LTI AGS 2.0, section 3.1).
SCOPES = (SCOPE_LINEITEM, SCOPE_SCORE)


class PassbackError(CoursehubError):
    """Passback cannot start: no grade service, no such assignment, no token URL..."""


@dataclass(frozen=True)
class PlannedScore:
    """One student's row of the plan: the LMS user id and score to send, or why not."""

    student_id: str
    user_id: str = ""
    score: float | None = None
    skip: str = ""


@dataclass(frozen=True)
class StudentOutcome:
    """What happened to one student's score: :data:`SENT`, :data:`SKIPPED` or :data:`FAILED`."""

    student_id: str
    outcome: str
    detail: str = ""
    score: float | None = None


@dataclass
class PassbackReport:
    """A passback's outcome: where it went and each student's outcome."""

    course_id: str
    assignment: str
    platform: str
    lms_course: str
    line_item: LineItem | None = None
    outcomes: list[StudentOutcome] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        """How many students had ``outcome``."""
        return Counter(o.outcome for o in self.outcomes)[outcome]


def plan_passback(
    table: GradeTable, assignment: str, subjects: dict[str, str], zero_missing: bool = False
) -> list[PlannedScore]:
    """Return who gets which score of ``assignment`` (pure), in the table's order.

    ``subjects``: ``{student_id: LMS user id}`` of the students who launched.

    Raises
    ------
    PassbackError
        If ``assignment`` is not in the table.
    """
    if assignment not in table.assignments:
        known = ", ".join(table.assignments) or "none"
        raise PassbackError(
            f"assignment {assignment!r} is not in the gradebook of {table.course_id} "
            f"(assignments: {known})"
        )
    column = table.assignments.index(assignment)
    plan = []
    for row in table.rows:
        if not row.enrolled:
            plan.append(PlannedScore(row.student_id, skip="no longer a student of the course"))
            continue
        cell = row.cells[column]
        if cell.state == GRADED and cell.score is not None:
            score: float | None = cell.score
        elif cell.state == NOT_SUBMITTED and zero_missing:
            score = 0.0
        else:
            why = "not submitted" if cell.state == NOT_SUBMITTED else "submitted, not graded yet"
            plan.append(PlannedScore(row.student_id, skip=why))
            continue
        user_id = subjects.get(row.student_id, "")
        if not user_id:
            skip = "never launched the hub from the LMS (no LMS user id to send to)"
            plan.append(PlannedScore(row.student_id, score=score, skip=skip))
            continue
        plan.append(PlannedScore(row.student_id, user_id, score))
    return plan


def choose_service(
    services: list[LtiGradeService], course_id: str, link_code: str | None = None
) -> LtiGradeService:
    """Return the grade service to send to: the one of ``link_code``, or the only one (pure).

    Raises
    ------
    PassbackError
        No link with grade services; an unknown code; several and no code;
        no token URL; missing scopes.
    """
    if not services:
        raise PassbackError(
            f"no LMS link of {course_id} has grade services: the LMS tool must allow "
            "them (Moodle: 'IMS LTI Assignment and Grade Services: use this service for "
            "grade sync and column management'), then someone launches from the LMS "
            "course once"
        )
    codes = ", ".join(f"{s.link.code} ({s.link.context_title})" for s in services)
    if link_code:
        matches = [s for s in services if s.link.code == link_code.strip().upper()]
        if not matches:
            raise PassbackError(
                f"{course_id} has no LMS link {link_code!r} with grade services: {codes}"
            )
        service = matches[0]
    elif len(services) > 1:
        raise PassbackError(f"{course_id} has several LMS links; choose one: {codes}")
    else:
        service = services[0]
    issuer = service.link.issuer
    if not service.token_url:
        raise PassbackError(
            f"the registration of the LMS platform {issuer} has no token_url: add it to "
            "the registrations file (docs/lti.md), render the hub configuration again, "
            "and launch once from the LMS course"
        )
    missing = [s for s in SCOPES if s not in service.scopes.split()]
    if missing:
        raise PassbackError(
            f"the LMS platform {issuer} does not let the tool use {', '.join(missing)} in "
            f"{service.link.context_title or service.link.context_id!r}: allow the tool "
            "grade sync and column management in the LMS"
        )
    return service


def apply_passback(
    session: Session,
    course: Course,
    layout: CourseLayout,
    assignment: str,
    *,
    link_code: str | None = None,
    zero_missing: bool = False,
    key_path: Path | None = None,
    http: Any = None,
    now: datetime | None = None,
) -> PassbackReport:
    """Send ``assignment``'s scores to the LMS; return each student's outcome.

    Raises
    ------
    PassbackError
        Grading not set up, an unknown assignment, no usable grade service.
    coursehub.lti.keys.ToolKeyError
        The tool has no key pair, or it is not private.
    coursehub.lti.ags.PlatformRefusedError
        The token or the line item refused: no score was sent.
    """
    import requests

    from coursehub.grading.export import read_grade_table
    from coursehub.grading.gradebook import read_roster

    service = choose_service(grade_services_of(session, course), course.course_id, link_code)
    if not layout.config_path.is_file():
        raise PassbackError(
            f"grading is not set up for {course.course_id}: run coursehub grading setup "
            f"{course.course_id}"
        )
    table = read_grade_table(layout, read_roster(session, course))
    issuer = service.link.issuer
    subjects = subjects_of(session, issuer, (r.student_id for r in table.rows))
    plan = plan_passback(table, assignment, subjects, zero_missing)
    maximum = table.max_scores[table.assignments.index(assignment)]
    report = PassbackReport(
        course.course_id, assignment, issuer, service.link.context_title or service.link.context_id
    )
    to_send = [p for p in plan if not p.skip]
    if not to_send:
        report.outcomes = [StudentOutcome(p.student_id, SKIPPED, p.skip, p.score) for p in plan]
        return report
    key = load_private_key(key_path or tool_key_path())
    client = http or requests.Session()
    token = request_token(client, issuer, service.token_url, service.client_id, key, SCOPES)
    item = find_or_create_line_item(
        client, issuer, service.lineitems_url, token, assignment, maximum
    )
    report.line_item = item
    when = now or datetime.now(UTC)
    for planned in plan:
        if planned.skip:
            outcome = StudentOutcome(planned.student_id, SKIPPED, planned.skip, planned.score)
        else:
            assert planned.score is not None
            body = render_score(planned.user_id, planned.score, maximum, when)
            problem = post_score(client, item, token, body)
            state = FAILED if problem else SENT
            outcome = StudentOutcome(planned.student_id, state, problem, planned.score)
        report.outcomes.append(outcome)
    return report


def render_report(report: PassbackReport) -> str:
    """Return the report as text: a summary line, then one line per student (pure)."""
    where = f"{report.lms_course!r} on {report.platform}"
    item = ""
    if report.line_item is not None:
        made = "created" if report.line_item.created else "found"
        item = f", line item {report.line_item.label!r} {made}"
    lines = [
        f"{report.assignment} of {report.course_id} -> {where}{item}: "
        f"{report.count(SENT)} sent, {report.count(SKIPPED)} skipped, "
        f"{report.count(FAILED)} failed"
    ]
    for o in report.outcomes:
        score = "" if o.score is None else f" {o.score:g}"
        detail = f": {o.detail}" if o.detail else ""
        lines.append(f"  {o.student_id}: {o.outcome}{score}{detail}")
    return "\n".join(lines)
