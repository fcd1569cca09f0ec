"""LMS accounts bound to catalog people, and the requests to bind one.

The LMS user (``issuer``, ``subject``: the ``sub`` claim, stable in the
LMS) is bound to a catalog person
(:class:`~coursehub.catalog.models.lti.LtiAccount`): a launch signs in as
an existing account only through this binding
(:mod:`coursehub.catalog.lti.identity`). A launch refused because its
username is an existing account not bound to the LMS user is kept as a
request (:class:`~coursehub.catalog.models.lti.LtiAccountRequest`, one per
LMS user) until a hub admin or the lead of the course confirms the binding
(:func:`coursehub.catalog.lti.confirm.confirm_account_request`).

Functions flush and never commit, as in :mod:`coursehub.catalog.people`.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from coursehub.catalog.errors import ConflictError, NotFoundError
from coursehub.catalog.models.base import utcnow
from coursehub.catalog.models.courses import Course, Person
from coursehub.catalog.models.lti import MAX_ID, LtiAccount, LtiAccountRequest, LtiLink


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
