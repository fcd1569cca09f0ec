"""An LTI 1.3 launch in the catalog: who, which course, which role; then the enrolment.

The hub's authenticator (:mod:`coursehub.spawn.lti`) has verified the
``id_token`` (signature, issuer, audience, expiry, deployment) and hands its
claims to the course app, which calls :func:`parse_launch` (pure) and
:func:`apply_launch`. Claim names are those of IMS LTI 1.3
(https://www.imsglobal.org/spec/lti/v1p3/, section 5) and OpenID Connect
Core 1.0 (``sub``, ``email``, ``given_name``, ``family_name``).

Rules
-----
- Roles come from the course-membership vocabulary of LIS v2 only (LTI 1.3,
  appendix A.2.3, "Context roles"): :data:`ROLE_MAP`. Institution
  (``.../institution/person#...``) and system (``.../system/person#...``)
  roles are ignored; a launch with no course role is refused.
- The username comes from the registration's ``username_claim``
  (:func:`username_from_claims`), normalised as a roster's
  (:func:`coursehub.catalog.people.check_username`), so a student imported
  from a roster and the same student launching from the LMS are one person.
  A launch that would make one person of two (another LMS user already
  launched as that username, or its e-mail or student number differ) is
  refused, never merged.
- A launch from a context not linked to a course records it pending
  (:func:`coursehub.catalog.lti.record_pending`) and changes nothing else.
- A launch never lowers a role: someone already in the course with a
  higher role (a lead launching as Instructor) keeps it.
- An enrolling launch that carries the grade services claim (LTI AGS 2.0)
  records it for its link (:mod:`coursehub.catalog.ltiags`), for grade
  passback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from coursehub.catalog.admin import check_writable
from coursehub.catalog.errors import ValidationError
from coursehub.catalog.lti import (
    Context,
    LtiLink,
    account_person,
    account_subjects,
    bind_account,
    find_link,
    record_pending,
    use_nonce,
)
from coursehub.catalog.ltiags import (
    GradeServiceClaim,
    launch_client_id,
    parse_grade_service,
    record_grade_service,
)
from coursehub.catalog.models import Person, Role
from coursehub.catalog.people import (
    add_member,
    check_username,
    course_leads,
    find_person,
    get_membership,
)
from coursehub.errors import CoursehubError

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
ROLES_CLAIM = LTI + "roles"
CONTEXT_CLAIM = LTI + "context"
DEPLOYMENT_CLAIM = LTI + "deployment_id"
CUSTOM_CLAIM = LTI + "custom"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
#: LIS v2 context roles (LTI 1.3 appendix A.2.3) -> catalog role; nothing else counts.
ROLE_MAP: dict[str, Role] = {
    f"{MEMBERSHIP}#Instructor": Role.TEACHER,
    f"{MEMBERSHIP}#TeachingAssistant": Role.GRADER,
    f"{MEMBERSHIP}/Instructor#TeachingAssistant": Role.GRADER,
    f"{MEMBERSHIP}#Learner": Role.STUDENT,
}
#: Rank of roles: a launch keeps the highest of the LMS's and the catalog's.
ROLE_RANK = {Role.STUDENT: 0, Role.GRADER: 1, Role.TEACHER: 2, Role.LEAD: 3}
#: Custom parameter naming a notebook of the course's material (a deep link).
NOTEBOOK_PARAM = "notebook"
_NOTEBOOK = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9 ._+-]*$")


class LaunchRefusedError(CoursehubError):
    """A launch the course app refuses; the message is shown to the person launching."""


class LaunchError(CoursehubError):
    """A launch request the hub should never send (missing or malformed claims)."""


@dataclass(frozen=True)
class Launch:
    """A launch's claims, parsed: who, from which LMS context, with which roles."""

    issuer: str
    deployment_id: str
    subject: str
    username: str
    context: Context | None
    roles: tuple[str, ...]
    nonce: str
    expires_at: datetime
    email: str | None = None
    student_number: str | None = None
    first_name: str = ""
    last_name: str = ""
    notebook: str | None = None
    role: Role | None = None
    grade_service: GradeServiceClaim | None = None
    client_id: str = ""
    token_url: str = ""


@dataclass
class LaunchResult:
    """What :func:`apply_launch` did: ``course_id`` and ``role`` once enrolled, else the
    pending ``link`` whose code the person passes on."""

    username: str
    course_id: str | None = None
    role: Role | None = None
    link: LtiLink | None = None
    changed: bool = False
    leads: list[str] = field(default_factory=list)


def plan_role(roles: list[str] | tuple[str, ...]) -> Role | None:
    """Return the catalog role of a launch's roles claim (pure): the highest course role.

    ``plan_role([f"{MEMBERSHIP}#Learner", ".../institution/person#Faculty"]) == Role.STUDENT``;
    no course role gives None.
    """
    found = [ROLE_MAP[r] for r in roles if r in ROLE_MAP]
    return max(found, key=ROLE_RANK.__getitem__) if found else None


def claim_value(claims: dict[str, Any], name: str) -> str:
    """Return the text of claim ``name`` (``email_local_part``, ``custom_<name>``, or a
    top-level claim) in ``claims``, ``""`` when absent (pure)."""
    if name == "email_local_part":
        return str(claims.get("email") or "").partition("@")[0]
    if name.startswith("custom_"):
        custom = claims.get(CUSTOM_CLAIM)
        return str(custom.get(name[len("custom_") :]) or "") if isinstance(custom, dict) else ""
    return str(claims.get(name) or "")


def username_from_claims(claims: dict[str, Any], username_claim: str) -> str:
    """Return the raw username ``claims`` give under ``username_claim`` (pure).

    ``username_claim`` is ``"email_local_part"`` (the e-mail before ``@``),
    ``"custom_<name>"`` (the LMS custom parameter ``<name>``, the convention of
    jupyterhub-ltiauthenticator's ``username_key``) or a top-level claim
    (``"sub"``, ``"preferred_username"``, ``"email"``).

    Raises
    ------
    LaunchRefusedError
        If the claim is missing or empty.
    """
    value = claim_value(claims, username_claim)
    if not value.strip():
        raise LaunchRefusedError(
            f"the LMS sent no {username_claim.replace('_', ' ')} for your account, and the hub "
            "names people by it: ask the LMS administrators to share it with this tool"
        )
    return value


def plan_notebook(value: object) -> str | None:
    """Return a deep link's notebook path relative to the course material, checked (pure).

    Raises
    ------
    LaunchRefusedError
        Unless a relative path of plain names (letters, digits, space, ``. _ + -``,
        no ``.``/``..`` segment) ending in ``.ipynb``, 300 characters at most.
    """
    if value is None or value == "":
        return None
    text = str(value).strip().strip("/")
    parts = text.split("/")
    if (
        len(text) > 300
        or not text.endswith(".ipynb")
        or any(p in ("", ".", "..") or not _NOTEBOOK.match(p) for p in parts)
    ):
        raise LaunchRefusedError(
            f"the LMS link names notebook {str(value)[:80]!r}, which is not a notebook path "
            "of the course material (e.g. week1/pendulum.ipynb): ask the teacher to fix the "
            f"activity's custom parameter {NOTEBOOK_PARAM}="
        )
    return text


def parse_launch(payload: dict[str, Any], now: datetime | None = None) -> Launch:
    """Return the :class:`Launch` of the hub's request body (pure).

    ``payload``: ``{"issuer", "deployment_id", "username_claim",
    "student_number_claim" (optional), "token_url" (optional: the platform's
    OAuth 2.0 token endpoint, for grade passback), "claims": the verified
    id_token}``.

    Raises
    ------
    LaunchError
        A field the hub always sends is missing.
    LaunchRefusedError
        No user (anonymous launch), no username, no course role, a bad notebook.
    """
    claims = payload.get("claims")
    if not isinstance(claims, dict):
        raise LaunchError("the launch request has no claims object")
    issuer = str(payload.get("issuer") or "")
    deployment_id = str(claims.get(DEPLOYMENT_CLAIM) or "")
    nonce = str(claims.get("nonce") or "")
    exp = claims.get("exp")
    if not issuer or not deployment_id or not nonce or not isinstance(exp, int):
        raise LaunchError("the launch lacks its issuer, deployment_id, nonce or exp")
    subject = str(claims.get("sub") or "")
    if not subject:
        raise LaunchRefusedError("the LMS launched anonymously (no sub claim): sign in to the LMS")
    raw_roles = claims.get(ROLES_CLAIM) or []
    roles = tuple(str(r) for r in raw_roles) if isinstance(raw_roles, list) else ()
    role = plan_role(roles)
    if role is None:
        raise LaunchRefusedError(
            "you have no role in this LMS course (learner, instructor or teaching "
            "assistant): the hub only opens to the course's members"
        )
    try:
        username = check_username(
            username_from_claims(claims, str(payload.get("username_claim") or "email_local_part"))
        )
    except ValidationError as exc:
        raise LaunchRefusedError(f"the LMS account cannot be a hub account: {exc}") from None
    ctx = claims.get(CONTEXT_CLAIM)
    context = None
    if isinstance(ctx, dict) and ctx.get("id"):
        title = str(ctx.get("title") or ctx.get("label") or "")
        context = Context(issuer, deployment_id, str(ctx["id"]), title)
    number_claim = str(payload.get("student_number_claim") or "")
    number = claim_value(claims, number_claim) if number_claim else None
    custom = claims.get(CUSTOM_CLAIM) or {}
    return Launch(
        issuer=issuer,
        deployment_id=deployment_id,
        subject=subject,
        username=username,
        context=context,
        roles=roles,
        nonce=nonce,
        expires_at=datetime.fromtimestamp(exp, UTC),
        email=str(claims.get("email") or "").strip() or None,
        student_number=(number or "").strip() or None,
        first_name=str(claims.get("given_name") or "").strip(),
        last_name=str(claims.get("family_name") or "").strip(),
        notebook=plan_notebook(custom.get(NOTEBOOK_PARAM) if isinstance(custom, dict) else None),
        role=role,
        grade_service=parse_grade_service(claims),
        client_id=launch_client_id(claims),
        token_url=str(payload.get("token_url") or ""),
    )


def check_same_person(session: Session, launch: Launch) -> Person | None:
    """Return the catalog person the launch is (None: a new one); refuse a collision.

    Raises
    ------
    LaunchRefusedError
        The LMS user launched before under another username; another LMS user
        already launched as this username; the person's stored e-mail or
        student number differs from the launch's; the launch's student number
        belongs to someone else.
    """
    ask = "ask a hub admin to sort out the two accounts"
    by_subject = account_person(session, launch.issuer, launch.subject)
    person = find_person(session, launch.username)
    if by_subject is not None and by_subject is not person:
        raise LaunchRefusedError(
            f"your LMS account is hub user {by_subject.username}, but the LMS now names you "
            f"{launch.username}: {ask}"
        )
    if launch.student_number:
        owner = session.query(Person).filter_by(student_number=launch.student_number).first()
        if owner is not None and owner is not person:
            raise LaunchRefusedError(
                f"your student number belongs to hub user {owner.username}, not "
                f"{launch.username}: {ask}"
            )
    if person is None or by_subject is not None:
        return person
    if account_subjects(session, launch.issuer, person):
        raise LaunchRefusedError(
            f"another LMS account already signs in as {launch.username}: {ask}"
        )
    differs = [
        name
        for name, stored, given in (
            ("e-mail", person.email, launch.email),
            ("student number", person.student_number, launch.student_number),
        )
        if stored and given and stored.strip().casefold() != given.strip().casefold()
    ]
    if differs:
        raise LaunchRefusedError(
            f"hub user {launch.username} exists with another {' and '.join(differs)} than "
            f"your LMS account's: {ask}"
        )
    return person


def claim_nonce(session: Session, launch: Launch, now: datetime | None = None) -> None:
    """Record the launch's nonce as used (the caller commits it whatever comes next).

    Raises
    ------
    LaunchRefusedError
        If the nonce was used before: the launch is a replay.
    """
    if not use_nonce(session, launch.issuer, launch.nonce, launch.expires_at, now):
        raise LaunchRefusedError("this launch was already used: start again from the LMS course")


def apply_launch(session: Session, launch: Launch) -> LaunchResult:
    """Record the launch: enrol the person in the linked course, or record a pending link.

    Call :func:`claim_nonce` first; the caller commits.

    Raises
    ------
    LaunchRefusedError
        A launch outside an LMS course, an archived course, a collision
        (:func:`check_same_person`), an enrolment the catalog refuses.
    """
    if launch.context is None:
        raise LaunchRefusedError(
            "the LMS launched the hub outside a course: add the tool to an LMS course"
        )
    link = find_link(session, launch.context)
    if link is None or link.course is None:
        link = record_pending(session, launch.context, launch.username)
        return LaunchResult(launch.username, link=link)
    course = link.course
    try:
        check_writable(course)
    except CoursehubError as exc:
        raise LaunchRefusedError(str(exc)) from None
    person = check_same_person(session, launch)
    assert launch.role is not None
    membership = get_membership(session, course, launch.username)
    current = membership.role if membership is not None else None
    role = launch.role
    if current is not None and ROLE_RANK[current] >= ROLE_RANK[role]:
        role = current
    fill = {
        name: value
        for name, value in (
            ("first_name", launch.first_name),
            ("last_name", launch.last_name),
            ("email", launch.email),
            ("student_number", launch.student_number),
        )
        if value and (person is None or not getattr(person, name))
    }
    changed = current != role or bool(fill)
    if changed:
        try:
            add_member(
                session,
                course,
                launch.username,
                role,
                first_name=fill.get("first_name", ""),
                last_name=fill.get("last_name", ""),
                email=fill.get("email"),
                student_number=fill.get("student_number"),
            )
        except CoursehubError as exc:
            raise LaunchRefusedError(
                f"you cannot be enrolled in {course.course_id}: {exc}"
            ) from None
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
