"""An LTI 1.3 launch's claims, parsed (pure): who, from which LMS context, which role.

The hub's authenticator (:mod:`coursehub.spawn.lti`) has verified the
``id_token`` (signature, issuer, audience, expiry, deployment) and hands its
claims to the course app, which calls :func:`parse_launch` and then
:func:`coursehub.catalog.lti.launch.apply_launch`. Claim names are those of
IMS LTI 1.3 (https://www.imsglobal.org/spec/lti/v1p3/, section 5) and
OpenID Connect Core 1.0 (``sub``, ``email``, ``given_name``, ``family_name``).

- Roles come from the course-membership vocabulary of LIS v2 only (LTI 1.3,
  appendix A.2.3, "Context roles"): :data:`ROLE_MAP`. Institution
  (``.../institution/person#...``) and system (``.../system/person#...``)
  roles are ignored; a launch with no course role is refused.
- The username comes from the registration's ``username_claim``
  (:func:`username_from_claims`), normalised as a roster's
  (:func:`coursehub.catalog.people.check_username`), so a student imported
  from a roster and the same student launching from the LMS are one person
  once the binding is confirmed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from coursehub.catalog.errors import ValidationError
from coursehub.catalog.lti.ags import GradeServiceClaim, launch_client_id, parse_grade_service
from coursehub.catalog.lti.links import Context
from coursehub.catalog.models.courses import Role
from coursehub.catalog.people import check_username
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
    #: The hub's admins (the authenticator's ``admin_users`` and admin users).
    hub_admins: frozenset[str] = frozenset()

    @property
    def instructor(self) -> bool:
        """Whether the launch's course role is Instructor (catalog teacher)."""
        return self.role == Role.TEACHER


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
    username = launch_username(claims, str(payload.get("username_claim") or "email_local_part"))
    context = launch_context(claims, issuer, deployment_id)
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


def launch_username(claims: dict[str, Any], username_claim: str) -> str:
    """Return the hub username of a launch's ``claims``, checked as a roster's (pure).

    Raises
    ------
    LaunchRefusedError
        If the claim is missing, or not a valid username
        (:func:`coursehub.catalog.people.check_username`).
    """
    try:
        return check_username(username_from_claims(claims, username_claim))
    except ValidationError as exc:
        raise LaunchRefusedError(f"the LMS account cannot be a hub account: {exc}") from None


def launch_context(claims: dict[str, Any], issuer: str, deployment_id: str) -> Context | None:
    """Return the LMS course context of a launch's ``claims``, None without one (pure)."""
    ctx = claims.get(CONTEXT_CLAIM)
    if isinstance(ctx, dict) and ctx.get("id"):
        title = str(ctx.get("title") or ctx.get("label") or "")
        return Context(issuer, deployment_id, str(ctx["id"]), title)
    return None
