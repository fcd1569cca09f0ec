"""What a hub admin or a course's lead confirms of LTI: account bindings and links by code.

A hub admin confirms any account request; a lead only the requests from an
LMS course linked to their course, for its members
(:func:`check_binding_by_lead`). The lead who links a pending context with
its code must be the Instructor whose launch showed it
(:func:`check_link_by_lead`).

Functions flush and never commit, as in :mod:`coursehub.catalog.people`.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from coursehub.catalog.errors import ForbiddenError, NotFoundError
from coursehub.catalog.lti.accounts import account_person, bind_account, check_unbound
from coursehub.catalog.lti.links import confirm_link
from coursehub.catalog.members import is_team
from coursehub.catalog.models.courses import Course, Person
from coursehub.catalog.models.lti import LtiAccountRequest, LtiLink
from coursehub.catalog.people import ensure_person, find_person, person_roles

log = logging.getLogger(__name__)


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
        As :func:`coursehub.catalog.lti.accounts.check_unbound`.
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
        As :func:`coursehub.catalog.lti.accounts.check_unbound`.
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
        As :func:`check_link_by_lead` and :func:`coursehub.catalog.lti.links.confirm_link`.
    """
    person = check_link_by_lead(session, link, lead)
    assert link.instructor_subject is not None
    bind_account(session, link.issuer, link.instructor_subject, person)
    return confirm_link(session, link, course, lead)
