"""The JSON API of a course's exams, under ``/api/v1/courses/<course_id>/exams``.

Who may do what (students are taken as hostile, the team as trusted in its
own course only):

``GET .../exams``, ``GET .../exams/<assignment>``
    everyone in the course: the exams and their windows (never the start
    code, only whether there is one);
``POST .../exams``, ``PUT .../exams/<assignment>/overrides/{students,groups}/<name>``
    a lead of the course, or an admin: create an exam, give extra time;
``POST .../exams/<assignment>/start``
    a student of the course, for themselves only: their time starts now
    (recorded here; starting again returns the same sitting); a new start
    stops the student's running servers through the hub, so that the next
    one is the exam server (:mod:`coursehub.spawn.examserver`);
``GET .../exams/<assignment>/sittings/<username>``
    that student, or the course's team: start, end, seconds left, receipt;
``GET .../exams/<assignment>/sittings``
    the course's team: every student's sitting (the proctor's table);
``POST .../exams/<assignment>/sittings/<username>/time``
    the lead and teachers: ``{"minutes": N}`` more for a student, live;
``POST .../exams/<assignment>/sittings/<username>/reopen``
    the lead and teachers: start a student's exam server again after a
    crash, during their own time (:mod:`coursehub.grading.examreopen`); 200 with
    the sitting and what the hub did, 400 naming ``username`` when refused,
    502 when the hub refused or did not answer;
``POST .../exams/<assignment>/events``
    the student, for themselves (the token's owner; the exam server forwards
    its exam clock's events with the server's token,
    :mod:`coursehub.examroom.clock`), only during their sitting:
    ``{"kind": "fullscreen-exit", "detail": "..."}``; 201 with the event
    kept, 400 naming the field, 409 when their exam is not running, 429 past
    the limits of :mod:`coursehub.catalog.examevents`;
``GET .../exams/<assignment>/events[?username=U]``
    the course's team and admins: the events, oldest first.

Bad input is a 400 whose ``fields`` name the field
(:func:`coursehub.catalog.examjson.field_of`); a start refused (window, code)
is a 409 saying why. A blueprint of :func:`coursehub.web.api.base.api_blueprint`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Response, abort, current_app, g, jsonify, request

from coursehub.catalog.errors import ConflictError
from coursehub.catalog.examcodes import WrongStartCodeError
from coursehub.catalog.examevents import EventLimitError, list_events, record_browser_event
from coursehub.catalog.examjson import (
    allowance_from_fields,
    exam_clock_json,
    exam_to_json,
    field_of,
    integer_field,
    sitting_to_json,
    window_from_fields,
)
from coursehub.catalog.examnetworks import address_allowed
from coursehub.catalog.examoverrides import override_of, set_override
from coursehub.catalog.examproctor import count_wrong_code, end_sitting, note_outside_start
from coursehub.catalog.exams import (
    add_time,
    create_exam,
    get_exam,
    list_exams,
    list_sittings,
    sitting_of,
    start_exam,
    window_of,
)
from coursehub.catalog.examtime import window_warnings
from coursehub.catalog.models.courses import Course, Role
from coursehub.catalog.people import normalize_username
from coursehub.catalog.queries import role_in_course
from coursehub.errors import CoursehubError, UsageError
from coursehub.grading.deadline import default_timezone
from coursehub.grading.examreopen import Reopened, reopen_exam
from coursehub.hub.hubclient import HubError, HubUnreachableError
from coursehub.web.access import Access
from coursehub.web.api.base import api_blueprint, api_course, json_error, read_body
from coursehub.web.api.payloads import PayloadError
from coursehub.web.hubsync import hub_client
from coursehub.web.saving import committing

bp = api_blueprint("api_exams", __name__)

EXAMS = "/courses/<course_id>/exams"
EXAM = EXAMS + "/<assignment>"
WINDOW_FIELDS = ("opens_at", "duration_min", "hard_end", "timezone")


def now() -> datetime:
    """The server's time, aware UTC (a student's clock is never asked)."""
    return datetime.now(UTC)


def refused(exc: UsageError) -> PayloadError:
    """Return the 400 of a refusal, under the field it names."""
    return PayloadError({field_of(exc): str(exc).split(": ", 1)[-1]})


def require_lead(session: Any, course: Course, access: Access) -> None:
    """403 unless the caller is a lead of ``course`` or an admin."""
    if access >= Access.ADMIN or role_in_course(session, g.identity.name, course) == Role.LEAD:
        return
    abort(403, description=f"only a lead of {course.course_id} or an admin can do this")


@bp.get(EXAMS)
def get_exams(course_id: str) -> Response:
    """The course's exams (everyone in the course)."""
    session, course, _ = api_course(course_id, Access.VIEW)
    return jsonify(exams=[exam_to_json(e, course.course_id) for e in list_exams(session, course)])


@bp.post(EXAMS)
def post_exam(course_id: str) -> tuple[Response, int]:
    """Make an assignment of the course an exam (a lead, an admin)."""
    session, course, access = api_course(course_id, Access.MANAGE)
    require_lead(session, course, access)
    optional: dict[str, type] = {name: object for name in WINDOW_FIELDS}
    more: dict[str, type] = {"start_code": str, "allowed_imports": str, "allowed_networks": str}
    more |= {"warn_before_min": object, "fullscreen": str}
    data = read_body({"assignment": str}, optional | more)
    try:
        window = window_from_fields(data, default_timezone())
        with committing(session):
            exam = create_exam(
                session,
                course,
                data["assignment"],
                window,
                g.identity.name,
                data.get("start_code"),
                allowed_imports=data.get("allowed_imports"),
                allowed_networks=data.get("allowed_networks"),
                warn_before_min=data.get("warn_before_min"),
                fullscreen=data.get("fullscreen"),
            )
    except UsageError as exc:
        raise refused(exc) from None
    from coursehub.grading.layout import assignment_warnings, layout_from_env

    found = assignment_warnings(layout_from_env(course.course_id), data["assignment"])
    warnings = window_warnings(window, now()) + found
    return jsonify(exam_to_json(exam, course.course_id) | {"warnings": warnings}), 201


@bp.get(EXAM)
def get_one_exam(course_id: str, assignment: str) -> Response:
    """One exam (everyone in the course)."""
    session, course, _ = api_course(course_id, Access.VIEW)
    return jsonify(exam_to_json(get_exam(session, course, assignment), course.course_id))


@bp.patch(EXAM)
def patch_exam(course_id: str, assignment: str) -> Response:
    """Change an exam's allowed imports, address ranges, start code or clock (a lead, an admin)."""
    from coursehub.catalog.examupdate import UPDATABLE, update_exam

    session, course, access = api_course(course_id, Access.MANAGE)
    require_lead(session, course, access)
    exam = get_exam(session, course, assignment)
    data = read_body({}, dict.fromkeys(UPDATABLE, str) | {"warn_before_min": object})
    try:
        with committing(session):
            changed = update_exam(session, exam, data)
    except UsageError as exc:
        raise refused(exc) from None
    return jsonify(exam_to_json(exam, course.course_id) | {"changed": changed})


@bp.put(EXAM + "/overrides/students/<username>")
def put_student_override(course_id: str, assignment: str, username: str) -> Response:
    """Give a student extra time or their own window (a lead, an admin)."""
    return _override(course_id, assignment, {"username": username})


@bp.put(EXAM + "/overrides/groups/<group>")
def put_group_override(course_id: str, assignment: str, group: str) -> Response:
    """Give a group extra time or its own window, a conflict slot (a lead, an admin)."""
    return _override(course_id, assignment, {"group": group})


def _override(course_id: str, assignment: str, target: dict[str, str]) -> Response:
    session, course, access = api_course(course_id, Access.MANAGE)
    require_lead(session, course, access)
    exam = get_exam(session, course, assignment)
    names = ("extra_minutes", "extra_percent", "opens_at", "hard_end")
    data = read_body({}, {name: object for name in names})
    try:
        allowance = allowance_from_fields(data, exam.timezone)
        previous = override_of(session, course, exam, **target)
        with committing(session):
            set_override(
                session,
                course,
                exam,
                allowance,
                g.identity.name,
                username=target.get("username"),
                group=target.get("group"),
            )
    except UsageError as exc:
        raise refused(exc) from None
    extra = {"extra_minutes": allowance.minutes, "extra_percent": allowance.percent}
    replaced = None if previous is None else previous.describe(exam.timezone)
    warnings = window_warnings(window_of(exam), now(), allowance)
    return jsonify(target | extra | {"replaced": replaced, "warnings": warnings})


@bp.post(EXAM + "/start")
def post_start(course_id: str, assignment: str) -> Response | tuple[Response, int]:
    """Start the caller's time now (a student of the course, for themselves)."""
    session, course, _ = api_course(course_id, Access.VIEW)
    if role_in_course(session, g.identity.name, course) != Role.STUDENT:
        abort(403, description=f"only a student of {course.course_id} starts an exam")
    exam = get_exam(session, course, assignment)
    data = read_body({}, {"code": str}, default={})
    moment = now()
    address = request.remote_addr or ""
    if not address_allowed(exam.allowed_networks, address):
        with committing(session):
            note_outside_start(session, course, exam, g.identity.name, address, moment)
        abort(
            403,
            description=f"{assignment} is sat from the room's network only "
            f"({exam.allowed_networks}); your address {address or 'is unknown'} is outside it",
        )
    try:
        with committing(session):
            sitting = start_exam(session, course, exam, g.identity.name, moment, data.get("code"))
    except WrongStartCodeError as exc:
        with committing(session):  # counted, although the start is rolled back
            count_wrong_code(session, course, exam, g.identity.name, moment)
        return json_error(str(exc), 409)
    except UsageError as exc:
        return json_error(str(exc), 409)
    if sitting.started_at == moment:  # a new start: the next server is the exam server
        stop_student_servers(g.identity.name)
    return jsonify(sitting_to_json(sitting, moment))


def stop_student_servers(username: str) -> None:
    """Stop the student's running servers, so that their next start is the exam server.

    Best effort: without a hub, or when the hub does not answer, the start
    stands and the app logs why (the student's server becomes the exam
    server at its next start).
    """
    client = hub_client()
    if client is None:
        return
    with client:
        try:
            stopped = client.stop_servers(username)
        except CoursehubError as exc:
            current_app.logger.warning("exam start of %s: servers not stopped: %s", username, exc)
            return
    if stopped:
        current_app.logger.info("exam start of %s: stopped servers %s", username, stopped)


@bp.get(EXAM + "/sittings")
def get_sittings(course_id: str, assignment: str) -> Response:
    """Every student's sitting (the course's team, admins)."""
    session, course, _ = api_course(course_id, Access.READ_ROSTER)
    exam = get_exam(session, course, assignment)
    moment = now()
    sittings = [sitting_to_json(s, moment) for s in list_sittings(session, course, exam)]
    return jsonify(exam_to_json(exam, course.course_id) | {"sittings": sittings})


@bp.get(EXAM + "/sittings/<username>")
def get_sitting(course_id: str, assignment: str, username: str) -> Response:
    """One student's sitting and receipt (that student, the course's team, admins)."""
    session, course, access = api_course(course_id, Access.VIEW)
    username = normalize_username(username)
    if access < Access.READ_ROSTER and username != g.identity.name:
        abort(403, description="a student reads only their own exam and receipt")
    exam = get_exam(session, course, assignment)
    try:
        sitting = sitting_of(session, course, exam, username)
    except UsageError as exc:
        abort(404, description=str(exc).split(": ", 1)[-1])
    return jsonify(sitting_to_json(sitting, now()) | exam_clock_json(exam))


@bp.post(EXAM + "/sittings/<username>/end")
def post_end(course_id: str, assignment: str, username: str) -> Response:
    """End a student's time now, the bell then submits their work (lead, teachers, admins)."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    exam = get_exam(session, course, assignment)
    moment = now()
    try:
        with committing(session):
            sitting = end_sitting(session, course, exam, username, g.identity.name, moment)
    except UsageError as exc:
        raise refused(exc) from None
    return jsonify(sitting_to_json(sitting, moment))


def reopen_server(
    session: Any, course: Course, exam: Any, username: str, reopened_by: str, moment: datetime
) -> Reopened:
    """Reopen a student's exam server with the app's hub client and commit the event.

    :func:`coursehub.grading.examreopen.reopen_exam` with
    :func:`coursehub.web.hubsync.hub_client` (none when the app has no hub).

    Raises
    ------
    UsageError
        Refused (not a student, not started, submitted at the bell, time over,
        unknown to the hub): nothing recorded.
    HubError, HubUnreachableError
        The hub refused or did not answer: nothing recorded.
    """
    client = hub_client()
    with committing(session):
        if client is None:
            return reopen_exam(session, course, exam, username, reopened_by, moment, None)
        with client:
            return reopen_exam(session, course, exam, username, reopened_by, moment, client)


@bp.post(EXAM + "/sittings/<username>/reopen")
def post_reopen(course_id: str, assignment: str, username: str) -> Response | tuple[Response, int]:
    """Start a student's exam server again after a crash (lead, teachers, admins)."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    exam = get_exam(session, course, assignment)
    moment = now()
    try:
        reopened = reopen_server(session, course, exam, username, g.identity.name, moment)
    except UsageError as exc:
        raise refused(exc) from None
    except (HubError, HubUnreachableError) as exc:
        return json_error(f"the hub did not reopen the server: {exc}", 502)
    answer = sitting_to_json(reopened.sitting, moment)
    return jsonify(answer | {"reopened_by": g.identity.name, "hub": reopened.outcome})


@bp.post(EXAM + "/sittings/<username>/time")
def post_time(course_id: str, assignment: str, username: str) -> Response:
    """Give a student who started more minutes, live (lead, teachers, admins)."""
    session, course, _ = api_course(course_id, Access.MANAGE)
    exam = get_exam(session, course, assignment)
    data = read_body({"minutes": object}, {})
    try:
        minutes = integer_field(data, "minutes")
        with committing(session):
            sitting = add_time(session, course, exam, username, minutes)
    except UsageError as exc:
        raise refused(exc) from None
    return jsonify(sitting_to_json(sitting, now()))


@bp.post(EXAM + "/events")
def post_event(course_id: str, assignment: str) -> tuple[Response, int]:
    """Keep an event of the caller's own running sitting (a student of the course)."""
    session, course, _ = api_course(course_id, Access.VIEW)
    if role_in_course(session, g.identity.name, course) != Role.STUDENT:
        abort(403, description=f"only a student of {course.course_id} reports exam events")
    exam = get_exam(session, course, assignment)
    data = read_body({"kind": object}, {"detail": object})
    try:
        with committing(session):
            event = record_browser_event(session, course, exam, g.identity.name, data, now())
    except EventLimitError as exc:
        return json_error(str(exc), 429)
    except ConflictError as exc:
        return json_error(str(exc), 409)
    except UsageError as exc:
        raise refused(exc) from None
    return jsonify(event.to_json()), 201


@bp.get(EXAM + "/events")
def get_events(course_id: str, assignment: str) -> Response:
    """The exam's events, oldest first (the course's team, admins)."""
    session, course, _ = api_course(course_id, Access.READ_ROSTER)
    exam = get_exam(session, course, assignment)
    username = request.args.get("username")
    name = normalize_username(username) if username else None
    events = [event.to_json() for event in list_events(session, exam, name)]
    return jsonify(course_id=course.course_id, assignment=exam.assignment, events=events)
