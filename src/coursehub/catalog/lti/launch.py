"""An LTI 1.3 launch in the catalog: the nonce, then the enrolment in the linked course.

The course app parses the launch (:func:`coursehub.catalog.lti.claims.parse_launch`),
claims its nonce (:func:`claim_nonce`) and applies it (:func:`apply_launch`).

- A launch from a context not linked to a course records it pending
  (:func:`coursehub.catalog.lti.links.record_pending`) and changes nothing
  else; the link code belongs to the Instructor who launched
  (:func:`coursehub.catalog.lti.confirm.check_link_by_lead`).
- Which account the launch is: :func:`coursehub.catalog.lti.identity.plan_account`.
  A launch fills empty name, e-mail and student number fields only of its
  own account.
- A launch never lowers a role: someone already in the course with a
  higher role (a lead launching as Instructor) keeps it.
- An enrolling launch that carries the grade services claim (LTI AGS 2.0)
  records it for its link (:mod:`coursehub.catalog.lti.ags`), for grade
  passback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from coursehub.catalog.admin import check_writable
from coursehub.catalog.lti.accounts import bind_account, record_account_request
from coursehub.catalog.lti.ags import record_grade_service
from coursehub.catalog.lti.claims import ROLE_RANK, Launch, LaunchRefusedError
from coursehub.catalog.lti.identity import AccountCollisionError, HubAccount, check_account
from coursehub.catalog.lti.links import find_link, record_pending
from coursehub.catalog.members import add_member, course_leads, get_membership
from coursehub.catalog.models.base import utcnow
from coursehub.catalog.models.courses import Course, Person, Role
from coursehub.catalog.models.lti import LtiLink, LtiNonce
from coursehub.catalog.people import find_person
from coursehub.errors import CoursehubError


@dataclass
class LaunchResult:
    """What :func:`apply_launch` did: ``course_id`` and ``role`` once enrolled, else the
    pending ``link`` (whose code an Instructor's launch shows), or the ``refused`` message
    of an account collision (an account request was recorded, the caller commits it)."""

    username: str
    course_id: str | None = None
    role: Role | None = None
    link: LtiLink | None = None
    changed: bool = False
    leads: list[str] = field(default_factory=list)
    refused: str | None = None


def use_nonce(
    session: Session, issuer: str, nonce: str, expires_at: datetime, now: datetime | None = None
) -> bool:
    """Record ``nonce`` of ``issuer`` as used; return False if it was used already.

    Nonces whose token expired are forgotten first (a token past ``exp`` is
    refused anyway). Runs in a SAVEPOINT, so a concurrent twin loses cleanly.
    """
    now = now or utcnow()
    session.execute(delete(LtiNonce).where(LtiNonce.expires_at < now))
    seen = session.scalar(
        select(LtiNonce.id).where(LtiNonce.issuer == issuer, LtiNonce.nonce == nonce)
    )
    if seen is not None:
        return False
    try:
        with session.begin_nested():
            session.add(LtiNonce(issuer=issuer, nonce=nonce, expires_at=expires_at))
    except IntegrityError:
        return False
    return True


def claim_nonce(session: Session, launch: Launch, now: datetime | None = None) -> None:
    """Record the launch's nonce as used (the caller commits it whatever comes next).

    Raises
    ------
    LaunchRefusedError
        If the nonce was used before: the launch is a replay.
    """
    if not use_nonce(session, launch.issuer, launch.nonce, launch.expires_at, now):
        raise LaunchRefusedError("this launch was already used: start again from the LMS course")


def apply_launch(
    session: Session, launch: Launch, hub_account: HubAccount | None = None
) -> LaunchResult:
    """Record the launch: enrol the person in the linked course, or record a pending link.

    Call :func:`claim_nonce` first; the caller commits. ``hub_account``: the
    hub's answer for the launch's username (None when the course app cannot
    ask the hub). An account collision
    (:class:`~coursehub.catalog.lti.identity.AccountCollisionError`) records an
    account request and returns its message in ``refused``.

    Raises
    ------
    LaunchRefusedError
        A launch outside an LMS course, an archived course, a refused account
        (:func:`coursehub.catalog.lti.identity.plan_account`), an enrolment the
        catalog refuses.
    """
    if launch.context is None:
        raise LaunchRefusedError(
            "the LMS launched the hub outside a course: add the tool to an LMS course"
        )
    link = find_link(session, launch.context)
    if link is None or link.course is None:
        return _record_pending_launch(session, launch)
    course = link.course
    try:
        check_writable(course)
    except CoursehubError as exc:
        raise LaunchRefusedError(str(exc)) from None
    try:
        person = check_account(session, launch, hub_account)
    except AccountCollisionError as exc:
        record_account_request(
            session,
            launch.issuer,
            launch.subject,
            launch.username,
            link,
            _launch_name(launch),
            launch.email or "",
        )
        return LaunchResult(launch.username, link=link, refused=str(exc))
    assert launch.role is not None
    membership = get_membership(session, course, launch.username)
    current = membership.role if membership is not None else None
    role = kept_role(current, launch.role)
    fill = identity_fill(launch, person)
    changed = current != role or bool(fill)
    if changed:
        _enrol(session, course, launch.username, role, fill)
    person = find_person(session, launch.username)
    assert person is not None
    bind_account(session, launch.issuer, launch.subject, person)
    if launch.grade_service is not None and launch.client_id:
        record_grade_service(
            session, link, launch.grade_service, launch.client_id, launch.token_url
        )
    return LaunchResult(
        launch.username,
        course.course_id,
        role,
        link=link,
        changed=changed,
        leads=course_leads(session, course),
    )


def _launch_name(launch: Launch) -> str:
    return f"{launch.first_name} {launch.last_name}".strip()


def _record_pending_launch(session: Session, launch: Launch) -> LaunchResult:
    """Record the launch's context pending (the code an Instructor's launch owns)."""
    assert launch.context is not None
    subject = launch.subject if launch.instructor else None
    link = record_pending(session, launch.context, launch.username, subject, _launch_name(launch))
    return LaunchResult(launch.username, link=link)


def kept_role(current: Role | None, launched: Role) -> Role:
    """Return the role a launch as ``launched`` leaves (pure): never lower than ``current``.

    ``kept_role(Role.LEAD, Role.TEACHER) == Role.LEAD``
    (:data:`coursehub.catalog.lti.claims.ROLE_RANK`).
    """
    if current is not None and ROLE_RANK[current] >= ROLE_RANK[launched]:
        return current
    return launched


def identity_fill(launch: Launch, person: Person | None) -> dict[str, str]:
    """Return the identity fields the launch fills (pure): ``{field: value}``.

    Only the launch's own account (``person``: a new one when None, or the
    one bound to its LMS user), only the fields it leaves empty: first and
    last name, e-mail, student number.
    """
    return {
        name: value
        for name, value in (
            ("first_name", launch.first_name),
            ("last_name", launch.last_name),
            ("email", launch.email),
            ("student_number", launch.student_number),
        )
        if value and (person is None or not getattr(person, name))
    }


def _enrol(
    session: Session, course: Course, username: str, role: Role, fill: dict[str, str]
) -> None:
    """Add ``username`` to ``course`` as ``role`` with the ``fill`` fields.

    Raises
    ------
    LaunchRefusedError
        If the catalog refuses the enrolment.
    """
    try:
        add_member(
            session,
            course,
            username,
            role,
            first_name=fill.get("first_name", ""),
            last_name=fill.get("last_name", ""),
            email=fill.get("email"),
            student_number=fill.get("student_number"),
        )
    except CoursehubError as exc:
        raise LaunchRefusedError(f"you cannot be enrolled in {course.course_id}: {exc}") from None
