"""LTI Advantage grade services in the catalog: the AGS endpoint of each LMS link, and LMS user ids.

A launch from an LMS course whose tool may send grades carries the claim
``https://purl.imsglobal.org/spec/lti-ags/claim/endpoint`` (IMS LTI
Assignment and Grade Services 2.0, section 3.1,
https://www.imsglobal.org/spec/lti-ags/v2p0/#assignment-and-grade-service-claim):
``scope`` (the scopes the tool may ask for), ``lineitems`` (the context's
line items URL) and, for a resource link with one line item, ``lineitem``.
:func:`parse_grade_service` reads it (pure); :func:`record_grade_service`
keeps the newest one per link (:class:`coursehub.catalog.models.lti.LtiGradeService`),
with the tool's client id (the launch's audience) and the platform's token
URL (from the hub's registration). Grade passback (:mod:`coursehub.lti`)
reads them back with :func:`grade_services_of` and the people's LMS user ids
(``sub``) with :func:`subjects_of`.

Functions flush and never commit, as in :mod:`coursehub.catalog.lti.links`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.models.base import utcnow
from coursehub.catalog.models.courses import Course, Person
from coursehub.catalog.models.lti import MAX_ID, LtiAccount, LtiGradeService, LtiLink

#: The AGS claim of a launch (LTI AGS 2.0, section 3.1).
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
#: Scope to read and create line items (LTI AGS 2.0, section 3.1).
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
#: Scope to post scores (LTI AGS 2.0, section 3.1).
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
#: Longest URL kept (the columns' length).
MAX_URL = 1000


@dataclass(frozen=True)
class GradeServiceClaim:
    """A launch's AGS claim, checked: scopes, line items URL, the resource link's line item."""

    scopes: tuple[str, ...]
    lineitems_url: str
    lineitem_url: str = ""


def _http_url(value: Any) -> str:
    text = str(value).strip() if isinstance(value, str) else ""
    parts = urlsplit(text)
    ok = parts.scheme in ("https", "http") and parts.netloc and len(text) <= MAX_URL
    return text if ok else ""


def parse_grade_service(claims: dict[str, Any]) -> GradeServiceClaim | None:
    """Return the AGS claim of a launch's claims, or None when absent or unusable (pure).

    A claim without an http(s) ``lineitems`` URL (e.g. a platform that only
    lets the tool read its single ``lineitem``) is None: passback creates a
    line item per assignment and needs the container.
    """
    claim = claims.get(AGS_CLAIM)
    if not isinstance(claim, dict):
        return None
    lineitems = _http_url(claim.get("lineitems"))
    if not lineitems:
        return None
    raw = claim.get("scope")
    scopes = tuple(str(s) for s in raw) if isinstance(raw, list) else ()
    return GradeServiceClaim(scopes, lineitems, _http_url(claim.get("lineitem")))


def launch_client_id(claims: dict[str, Any]) -> str:
    """Return the tool's client id a launch was made for: ``azp``, else the one ``aud`` (pure).

    OpenID Connect Core 1.0, section 2: ``aud`` is a string or a list; with
    several audiences, ``azp`` names the client.
    """
    aud = claims.get("aud")
    if claims.get("azp"):
        return str(claims["azp"])[:MAX_ID]
    if isinstance(aud, list):
        return str(aud[0])[:MAX_ID] if len(aud) == 1 else ""
    return str(aud or "")[:MAX_ID]


def record_grade_service(
    session: Session,
    link: LtiLink,
    claim: GradeServiceClaim,
    client_id: str,
    token_url: str = "",
) -> LtiGradeService:
    """Keep ``claim`` as the grade service of ``link`` (replacing an older one)."""
    service = session.scalar(select(LtiGradeService).where(LtiGradeService.link_pk == link.id))
    if service is None:
        service = LtiGradeService(link_pk=link.id)
        session.add(service)
    service.client_id = client_id[:MAX_ID]
    service.token_url = _http_url(token_url)
    service.lineitems_url = claim.lineitems_url
    service.lineitem_url = claim.lineitem_url
    service.scopes = " ".join(claim.scopes)[:MAX_URL]
    service.updated_at = utcnow()
    session.flush()
    return service


def grade_services_of(session: Session, course: Course) -> list[LtiGradeService]:
    """Return the grade services of the LMS links of ``course``, by the LMS course's title."""
    query = (
        select(LtiGradeService)
        .join(LtiLink, LtiGradeService.link_pk == LtiLink.id)
        .where(LtiLink.course_pk == course.id)
        .order_by(LtiLink.context_title, LtiLink.id)
    )
    return list(session.scalars(query))


def subjects_of(session: Session, issuer: str, usernames: Iterable[str]) -> dict[str, str]:
    """Return ``{username: LMS user id}`` of those of ``usernames`` who launched from ``issuer``.

    A person with no LMS account at ``issuer`` (never launched) is absent.
    """
    names = sorted(set(usernames))
    if not names:
        return {}
    query = (
        select(Person.username, LtiAccount.subject)
        .join(LtiAccount, LtiAccount.person_pk == Person.id)
        .where(LtiAccount.issuer == issuer, Person.username.in_(names))
        .order_by(LtiAccount.id)
    )
    found: dict[str, str] = {}
    for username, subject in session.execute(query):
        found.setdefault(username, subject)
    return found
