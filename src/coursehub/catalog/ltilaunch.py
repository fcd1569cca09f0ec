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
  from a roster and the same student launching from the LMS are one person
  once the binding is confirmed.
- Which account a launch is, is decided in one place, :func:`plan_account`:
  a launch signs in as an existing account (a catalog person, or a hub user
  outside the catalog) only if it is bound to the launch's LMS user
  (``issuer``, ``sub``: :class:`coursehub.catalog.models.lti.LtiAccount`); the
  binding is made by that account's first launch when it was new, or
  confirmed by a hub admin or the course's lead
  (:func:`confirm_account_request`, :func:`confirm_link_as_lead`). Claims
  (e-mail, names, student number) never prove an identity. A hub admin
  (the hub's list the launch carries, or the hub's user model) is never
  signed in from the LMS. A launch fills empty name, e-mail and student
  number fields only of its own account.
- A launch from a context not linked to a course records it pending
  (:func:`coursehub.catalog.lti.record_pending`) and changes nothing else;
  the link code belongs to the Instructor who launched
  (:func:`check_link_by_lead`).
- A launch never lowers a role: someone already in the course with a
  higher role (a lead launching as Instructor) keeps it.
- An enrolling launch that carries the grade services claim (LTI AGS 2.0)
  records it for its link (:mod:`coursehub.catalog.ltiags`), for grade
  passback.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.admin import check_writable
from coursehub.catalog.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from coursehub.catalog.lti import (
    Context,
    account_person,
    account_subjects,
    bind_account,
    confirm_link,
    find_link,
    record_account_request,
    record_pending,
    use_nonce,
)
from coursehub.catalog.ltiags import (
    GradeServiceClaim,
    launch_client_id,
    parse_grade_service,
    record_grade_service,
)
from coursehub.catalog.models.courses import Course, Person, Role
from coursehub.catalog.models.lti import LtiAccountRequest, LtiLink
from coursehub.catalog.people import (
    add_member,
    check_username,
    course_leads,
    ensure_person,
    find_person,
    get_membership,
    is_team,
    person_roles,
)
from coursehub.errors import CoursehubError

log = logging.getLogger(__name__)

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
    #: The hub's admins (the authenticator's ``admin_users`` and admin users).
    hub_admins: frozenset[str] = frozenset()

    @property
    def instructor(self) -> bool:
        """Whether the launch's course role is Instructor (catalog teacher)."""
        return self.role == Role.TEACHER


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
    OAuth 2.0 token endpoint, for grade passback), "hub_admins": the hub's
    admin usernames, "claims": the verified id_token}``.

    Raises
    ------
    LaunchError
        A field the hub always sends is missing (``hub_admins`` included).
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
    admins = payload.get("hub_admins")
    if not isinstance(admins, list):
        raise LaunchError(
            "the launch lacks the hub's admin list (hub_admins): the hub's coursehub is older "
            "than the course app's, update it"
        )
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
        hub_admins=frozenset(str(name).strip().lower() for name in admins),
    )


@dataclass(frozen=True)
class HubAccount:
    """What the hub says of a username: whether a hub user has it, whether it is an admin."""

    exists: bool
    admin: bool = False


@dataclass(frozen=True)
class AccountFacts:
    """What decides whether a launch maps onto an account (:func:`plan_account`)."""

    username: str
    #: The username of the person the launch's LMS user is bound to, None if unbound.
    bound_to: str | None
    #: Whether the catalog has a person with ``username``.
    person_exists: bool
    #: Whether that person is bound to another LMS user of the same platform.
    person_bound_elsewhere: bool
    #: Whether ``username`` is a hub admin (the hub's list, or its user model).
    hub_admin: bool
    #: Whether the hub has a user ``username`` (None: the course app cannot ask the hub).
    hub_user_exists: bool | None = None
    #: The username of the person holding the launch's student number, if any.
    student_number_owner: str | None = None


class AccountCollisionError(LaunchRefusedError):
    """A launch whose username is an existing account not bound to its LMS user: a hub
    admin or the course's lead may confirm the binding (an account request is kept)."""


#: The two ways a launch maps onto an account.
BOUND, NEW = "bound", "new"


def plan_account(facts: AccountFacts) -> str:
    """Decide whether a launch maps onto an account (pure): :data:`BOUND` (the account its
    LMS user is bound to) or :data:`NEW` (a new account nobody has).

    The one rule of identity from the LMS: a launch never signs in as an
    existing account (catalog person or hub user) unless that account is
    bound to the launch's LMS user (platform and ``sub``), a binding only a
    hub admin or the course's lead confirms; never as a hub admin.

    Raises
    ------
    LaunchRefusedError
        The username is a hub admin's; the LMS user is bound to another
        username; the student number belongs to someone else; the username's
        person is bound to another LMS user.
    AccountCollisionError
        The username is an existing account not bound to the LMS user.
    """
    name = facts.username
    if facts.hub_admin:
        raise LaunchRefusedError(
            f"hub user {name} is a hub admin: hub admins sign in on the hub's login page, "
            "never from the LMS"
        )
    ask = "ask a hub admin to sort out the two accounts"
    if facts.bound_to is not None and facts.bound_to != name:
        raise LaunchRefusedError(
            f"your LMS account is hub user {facts.bound_to}, but the LMS now names you "
            f"{name}: {ask}"
        )
    if facts.student_number_owner is not None and facts.student_number_owner != name:
        raise LaunchRefusedError(
            f"your student number belongs to hub user {facts.student_number_owner}, not "
            f"{name}: {ask}"
        )
    if facts.bound_to is not None:
        return BOUND
    if facts.person_bound_elsewhere:
        raise LaunchRefusedError(f"another LMS account already signs in as {name}: {ask}")
    if facts.person_exists or facts.hub_user_exists:
        raise AccountCollisionError(
            f"hub user {name} already exists and is not bound to your LMS account, so this "
            "launch does not sign you in as them: if it is you, ask the lead of the course "
            "or a hub admin to confirm it (course page > LMS links), then launch again"
        )
    return NEW


def account_facts(
    session: Session, launch: Launch, hub_account: HubAccount | None = None
) -> AccountFacts:
    """Return the :class:`AccountFacts` of ``launch`` from the catalog, the hub's admin list
    the launch carries (``hub_admins``) and ``hub_account`` (the hub's answer for the
    username; None when the course app cannot ask the hub)."""
    bound = account_person(session, launch.issuer, launch.subject)
    person = find_person(session, launch.username)
    owner = None
    if launch.student_number:
        holder = session.scalar(
            select(Person).where(Person.student_number == launch.student_number)
        )
        owner = holder.username if holder is not None else None
    return AccountFacts(
        username=launch.username,
        bound_to=bound.username if bound is not None else None,
        person_exists=person is not None,
        person_bound_elsewhere=person is not None
        and any(s != launch.subject for s in account_subjects(session, launch.issuer, person)),
        hub_admin=launch.username in launch.hub_admins
        or (hub_account is not None and hub_account.admin),
        hub_user_exists=hub_account.exists if hub_account is not None else None,
        student_number_owner=owner,
    )


def check_account(
    session: Session, launch: Launch, hub_account: HubAccount | None = None
) -> Person | None:
    """Return the person the launch is (None: a new one), by :func:`plan_account`.

    Raises
    ------
    LaunchRefusedError, AccountCollisionError
        As :func:`plan_account`.
    """
    plan = plan_account(account_facts(session, launch, hub_account))
    return find_person(session, launch.username) if plan == BOUND else None


def check_binding_by_lead(session: Session, person: Person, course: Course) -> None:
    """Check that a lead of ``course`` may confirm an LMS binding of ``person``.

    Raises
    ------
    ForbiddenError
        Unless ``person`` is a member of ``course`` with no team role in another
        course (a hub admin confirms the others).
    """
    roles = person_roles(session, person)
    elsewhere = [pk for pk, role in roles.items() if pk != course.id and is_team(role)]
    if course.id not in roles or elsewhere:
        where = "is not a member of" if course.id not in roles else "teaches beyond"
        raise ForbiddenError(
            f"{person.username} {where} {course.course_id}: only a hub admin may confirm "
            "their LMS account (coursehub lti bind)"
        )


def check_unbound(session: Session, issuer: str, subject: str, person: Person) -> None:
    """Check that the LMS user ``subject`` of ``issuer`` and ``person`` may be bound.

    Raises
    ------
    ConflictError
        The LMS user is bound to someone else, or ``person`` to another LMS user of
        ``issuer``.
    """
    bound = account_person(session, issuer, subject)
    if bound is not None and bound is not person:
        raise ConflictError(f"that LMS account is already bound to hub user {bound.username}")
    if any(s != subject for s in account_subjects(session, issuer, person)):
        raise ConflictError(
            f"hub user {person.username} is already bound to another LMS account of {issuer}"
        )


def confirm_account_request(
    session: Session, request: LtiAccountRequest, by: str, *, admin: bool, course: Course | None
) -> Person:
    """Bind the LMS user of ``request`` to the account it named, confirmed by ``by``.

    A hub admin (``admin``) confirms any request (a hub user outside the
    catalog becomes a catalog person); a lead only the requests from an LMS
    course linked to their ``course``, for its members
    (:func:`check_binding_by_lead`).

    Raises
    ------
    ForbiddenError
        A lead confirming a request of another course, or for someone a lead may not
        vouch for.
    NotFoundError
        A lead confirming for someone the catalog does not know.
    ConflictError
        As :func:`check_unbound`.
    """
    person = find_person(session, request.username)
    if not admin:
        if course is None or request.link is None or request.link.course_pk != course.id:
            raise ForbiddenError(
                f"the LMS account of {request.username} did not launch from an LMS course "
                "linked to this course: a hub admin confirms it"
            )
        if person is None:
            raise NotFoundError(
                f"{request.username} is a hub user outside the catalog: only a hub admin "
                "may confirm their LMS account (coursehub lti bind)"
            )
        check_binding_by_lead(session, person, course)
    if person is None:
        person = ensure_person(session, request.username)
    check_unbound(session, request.issuer, request.subject, person)
    log.info(
        "LTI: %s bound LMS user %s of %s to %s",
        by,
        request.subject,
        request.issuer,
        person.username,
    )
    bind_account(session, request.issuer, request.subject, person)
    return person


def check_link_by_lead(session: Session, link: LtiLink, lead: str) -> Person:
    """Return the person of ``lead`` if they may link the pending ``link`` with its code.

    The code belongs to the Instructor whose launch showed it: the lead must
    be that person, their account bound to that LMS user, or, unbound yet,
    the account the Instructor's launch named (linking then binds it).

    Raises
    ------
    ForbiddenError
        No Instructor launched, or the code was shown to someone else.
    ConflictError
        As :func:`check_unbound`.
    """
    if link.instructor_subject is None:
        raise ForbiddenError(
            f"no Instructor launched from the LMS course {link.context_title!r}: its link "
            "code comes from an Instructor's launch, or a hub admin links it"
        )
    person = find_person(session, lead)
    bound = account_person(session, link.issuer, link.instructor_subject)
    who = bound.username if bound is not None else link.instructor_username
    if person is None or who != person.username:
        raise ForbiddenError(
            f"the code of {link.context_title!r} was shown to the LMS's Instructor {who}, not "
            "to you: that Instructor links it, as lead of the course, or a hub admin"
        )
    check_unbound(session, link.issuer, link.instructor_subject, person)
    return person


def confirm_link_as_lead(session: Session, link: LtiLink, course: Course, lead: str) -> LtiLink:
    """Link the pending ``link`` to ``course`` for its lead ``lead``, the Instructor whose
    launch showed the code (:func:`check_link_by_lead`); their LMS user is bound to them.

    Raises
    ------
    ForbiddenError, ConflictError
        As :func:`check_link_by_lead` and :func:`coursehub.catalog.lti.confirm_link`.
    """
    person = check_link_by_lead(session, link, lead)
    assert link.instructor_subject is not None
    bind_account(session, link.issuer, link.instructor_subject, person)
    return confirm_link(session, link, course, lead)


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
    ask the hub). An account collision (:class:`AccountCollisionError`)
    records an account request and returns its message in ``refused``.

    Raises
    ------
    LaunchRefusedError
        A launch outside an LMS course, an archived course, a refused account
        (:func:`plan_account`), an enrolment the catalog refuses.
    """
    if launch.context is None:
        raise LaunchRefusedError(
            "the LMS launched the hub outside a course: add the tool to an LMS course"
        )
    link = find_link(session, launch.context)
    if link is None or link.course is None:
        name = f"{launch.first_name} {launch.last_name}".strip()
        subject = launch.subject if launch.instructor else None
        link = record_pending(session, launch.context, launch.username, subject, name)
        return LaunchResult(launch.username, link=link)
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
            f"{launch.first_name} {launch.last_name}".strip(),
            launch.email or "",
        )
        return LaunchResult(launch.username, link=link, refused=str(exc))
    assert launch.role is not None
    membership = get_membership(session, course, launch.username)
    current = membership.role if membership is not None else None
    role = launch.role
    if current is not None and ROLE_RANK[current] >= ROLE_RANK[role]:
        role = current
    # Only the launch's own account: a new person, or the one bound to its LMS user.
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
