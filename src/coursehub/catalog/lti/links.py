"""LMS course contexts linked to courses: pending links, their codes, confirmation.

An LMS (Moodle, Canvas...) launches the hub with an ``id_token`` whose
context claim names the LMS course (IMS LTI 1.3, section 5.4.1,
https://www.imsglobal.org/spec/lti/v1p3/#context-claim). The first launch
from an unknown context records it *pending*
(:class:`~coursehub.catalog.models.lti.LtiLink`, ``course_pk`` None) with
the context's title and a random code (:func:`new_code`). The code belongs
to the newest Instructor who launched from the context: only that person,
as lead of a course, links the context with it
(:func:`coursehub.catalog.lti.confirm.confirm_link_as_lead`); a hub admin
links any pending context (:func:`confirm_link`). After that, launches from
the context enrol people in that course. A context is linked to one course.

Functions flush and never commit, as in :mod:`coursehub.catalog.people`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.errors import ConflictError, NotFoundError
from coursehub.catalog.models.base import utcnow
from coursehub.catalog.models.courses import Course
from coursehub.catalog.models.lti import MAX_ID, LtiLink

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
