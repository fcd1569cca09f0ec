"""LTI 1.3 in the catalog: LMS course contexts linked to courses, LMS accounts, used nonces.

An LMS (Moodle, Canvas...) launches the hub with an ``id_token`` whose
context claim names the LMS course (IMS LTI 1.3, section 5.4.1,
https://www.imsglobal.org/spec/lti/v1p3/#context-claim). Five tables:

``lti_links`` (:class:`LtiLink`)
    One row per LMS context (``issuer``, ``deployment_id``, ``context_id``).
    The first launch from an unknown context records it *pending*
    (``course_pk`` None) with the context's title and a random
    :attr:`LtiLink.code`. The code belongs to the newest Instructor who
    launched from the context (``instructor_subject``, ``instructor_username``):
    only that launch shows it, and only that person, as lead of a course,
    links the context with it (:func:`coursehub.catalog.ltilaunch.confirm_link_as_lead`);
    a hub admin links any pending context (:func:`confirm_link`). After that,
    launches from the context enrol people in that course. A context is
    linked to one course.
``lti_accounts`` (:class:`LtiAccount`)
    The LMS user (``issuer``, ``subject``: the ``sub`` claim, stable in the
    LMS) bound to a catalog person: a launch signs in as an existing account
    only through this binding (:mod:`coursehub.catalog.ltilaunch`).
``lti_account_requests`` (:class:`LtiAccountRequest`)
    A launch refused because its username is an existing account that is
    not bound to the LMS user: kept (one per LMS user) until a hub admin or
    the lead of the course confirms the binding
    (:func:`coursehub.catalog.ltilaunch.confirm_account_request`).
``lti_nonces`` (:class:`LtiNonce`)
    Every launch's ``nonce``, until its ``id_token`` expires: a second
    launch with the same one is a replay (OpenID Connect Core 1.0, section
    15.5.2, https://openid.net/specs/openid-connect-core-1_0.html#NonceNotes).
``lti_grade_services`` (:class:`LtiGradeService`)
    A link's grade service (LTI Advantage AGS) as its newest launch names
    it, for grade passback (:mod:`coursehub.catalog.ltiags`).

Functions flush and never commit, as in :mod:`coursehub.catalog.people`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from coursehub.catalog.errors import ConflictError, NotFoundError
from coursehub.catalog.models.base import utcnow
from coursehub.catalog.models.courses import Course, Person
from coursehub.catalog.models.lti import MAX_ID, LtiAccount, LtiAccountRequest, LtiLink, LtiNonce

#: Alphabet of link codes: no 0/O, 1/I/L, read aloud or typed from a screen without doubt.
CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
#: Characters in a link code (31**8, about 8.5e11 codes).
CODE_LENGTH = 8


@dataclass(frozen=True)
class Context:
    """An LMS course context as a launch names it."""

    issuer: str
    deployment_id: str
    context_id: str
    title: str = ""


def new_code() -> str:
    """Return a random link code, e.g. ``"K7QX-3MZP"`` (:data:`CODE_ALPHABET`)."""
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    return f"{raw[:4]}-{raw[4:]}"


def parse_code(text: str) -> str:
    """Return a link code as stored (upper case, ``XXXX-XXXX``) from what someone typed (pure).

    ``parse_code(" k7qx3mzp ") == "K7QX-3MZP"``; anything else gives ``""``.
    """
    raw = "".join(ch for ch in text.upper() if ch not in " -")
    if len(raw) != CODE_LENGTH or any(ch not in CODE_ALPHABET for ch in raw):
        return ""
    return f"{raw[:4]}-{raw[4:]}"


def find_link(session: Session, context: Context) -> LtiLink | None:
    """Return the link of ``context`` (pending or not), or None."""
    return session.scalar(
        select(LtiLink).where(
            LtiLink.issuer == context.issuer,
            LtiLink.deployment_id == context.deployment_id,
            LtiLink.context_id == context.context_id,
        )
    )


def record_pending(
    session: Session,
    context: Context,
    username: str,
    instructor_subject: str | None = None,
    instructor_name: str = "",
) -> LtiLink:
    """Return the link of ``context``, recording it pending (with a new code) if unknown.

    A pending link's title follows the LMS (the newest launch's title). With
    ``instructor_subject`` (an Instructor's launch), the code belongs to that
    LMS user: a different Instructor's launch gets a new code, and the old
    one stops working.
    """
    link = find_link(session, context)
    if link is None:
        link = LtiLink(
            issuer=context.issuer,
            deployment_id=context.deployment_id,
            context_id=context.context_id,
            context_title=context.title[:300],
            code=new_code(),
            first_launch_by=username[:128],
        )
        session.add(link)
    elif link.pending and context.title:
        link.context_title = context.title[:300]
    if link.pending and instructor_subject and link.instructor_subject != instructor_subject:
        if link.instructor_subject is not None:
            link.code = new_code()
        link.instructor_subject = instructor_subject[:MAX_ID]
        link.instructor_username = username[:128]
        link.instructor_name = instructor_name[:300]
    session.flush()
    return link


def get_pending(session: Session, code: str) -> LtiLink:
    """Return the pending link with ``code`` (as typed, see :func:`parse_code`).

    Raises
    ------
    NotFoundError
        If no pending link has that code (a typo, or already linked).
    """
    stored = parse_code(code)
    link = session.scalar(select(LtiLink).where(LtiLink.code == stored)) if stored else None
    if link is None or not link.pending:
        raise NotFoundError(
            f"no LMS course waits for a link with code {code.strip()[:20]!r}: check the code "
            "the LMS launch page showed (it is used once)"
        )
    return link


def confirm_link(
    session: Session, link: LtiLink, course: Course, by: str, now: datetime | None = None
) -> LtiLink:
    """Link the pending ``link`` to ``course``, confirmed by ``by``.

    Raises
    ------
    ConflictError
        If the link is already confirmed (to this or another course).
    """
    if not link.pending:
        where = link.course.course_id if link.course is not None else "a course"
        raise ConflictError(f"the LMS course {link.context_title!r} is already linked to {where}")
    link.course = course
    link.confirmed_at = now or utcnow()
    link.confirmed_by = by[:128]
    session.flush()
    return link


def unlink(session: Session, course: Course, link_pk: int) -> LtiLink:
    """Remove the link ``link_pk`` of ``course``; later launches from it are pending again.

    Raises
    ------
    NotFoundError
        If ``course`` has no such link.
    """
    link = session.get(LtiLink, link_pk)
    if link is None or link.course_pk != course.id:
        raise NotFoundError(f"course {course.course_id} has no LMS link {link_pk}")
    session.delete(link)
    session.flush()
    return link


def links_of(session: Session, course: Course) -> list[LtiLink]:
    """Return the LMS contexts linked to ``course``, by title."""
    query = select(LtiLink).where(LtiLink.course_pk == course.id).order_by(LtiLink.context_title)
    return list(session.scalars(query))


def pending_links(session: Session) -> list[LtiLink]:
    """Return every pending link, oldest first (for hub admins)."""
    query = select(LtiLink).where(LtiLink.course_pk.is_(None)).order_by(LtiLink.first_launch_at)
    return list(session.scalars(query))


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


def account_person(session: Session, issuer: str, subject: str) -> Person | None:
    """Return the person the LMS user ``subject`` of ``issuer`` launched as before, or None."""
    query = (
        select(Person)
        .join(LtiAccount, LtiAccount.person_pk == Person.id)
        .where(LtiAccount.issuer == issuer, LtiAccount.subject == subject)
    )
    return session.scalar(query)


def account_subjects(session: Session, issuer: str, person: Person) -> list[str]:
    """Return the LMS users of ``issuer`` who launched as ``person``."""
    query = select(LtiAccount.subject).where(
        LtiAccount.issuer == issuer, LtiAccount.person_pk == person.id
    )
    return list(session.scalars(query))


def bind_account(session: Session, issuer: str, subject: str, person: Person) -> None:
    """Record that the LMS user ``subject`` of ``issuer`` is ``person`` (once); a request
    for that LMS user is settled by it and removed."""
    if account_person(session, issuer, subject) is None:
        session.add(LtiAccount(issuer=issuer, subject=subject, person=person))
    session.execute(
        delete(LtiAccountRequest).where(
            LtiAccountRequest.issuer == issuer, LtiAccountRequest.subject == subject
        )
    )
    session.flush()


def record_account_request(
    session: Session,
    issuer: str,
    subject: str,
    username: str,
    link: LtiLink | None,
    name: str = "",
    email: str = "",
) -> LtiAccountRequest:
    """Return the request of LMS user ``subject`` of ``issuer`` to be ``username``, recorded or
    updated (the newest launch's username, link, name and e-mail)."""
    request = session.scalar(
        select(LtiAccountRequest).where(
            LtiAccountRequest.issuer == issuer, LtiAccountRequest.subject == subject
        )
    )
    if request is None:
        request = LtiAccountRequest(issuer=issuer[:MAX_ID], subject=subject[:MAX_ID])
        session.add(request)
    request.username = username[:128]
    request.link = link
    request.name = name[:300]
    request.email = email[:320]
    request.requested_at = utcnow()
    session.flush()
    return request


def get_account_request(session: Session, request_pk: int) -> LtiAccountRequest:
    """Return the account request ``request_pk``.

    Raises
    ------
    NotFoundError
        If there is none (already confirmed, or a typo).
    """
    request = session.get(LtiAccountRequest, request_pk)
    if request is None:
        raise NotFoundError(
            f"no LMS account waits for a confirmation with number {request_pk}: "
            "list them with `coursehub lti requests`"
        )
    return request


def account_requests(session: Session, course: Course | None = None) -> list[LtiAccountRequest]:
    """Return the account requests from the LMS contexts linked to ``course`` (None: every
    request), oldest first."""
    query = select(LtiAccountRequest).order_by(LtiAccountRequest.requested_at)
    if course is not None:
        query = query.join(LtiLink, LtiLink.id == LtiAccountRequest.link_pk).where(
            LtiLink.course_pk == course.id
        )
    return list(session.scalars(query))
