"""Which account an LTI launch is: decided in one place, :func:`plan_account`.

A launch signs in as an existing account (a catalog person, or a hub user
outside the catalog) only if it is bound to the launch's LMS user
(``issuer``, ``sub``: :class:`coursehub.catalog.models.lti.LtiAccount`); the
binding is made by that account's first launch when it was new, or
confirmed by a hub admin or the course's lead
(:mod:`coursehub.catalog.lti.confirm`). Claims (e-mail, names, student
number) never prove an identity. A hub admin (the hub's list the launch
carries, or the hub's user model) is never signed in from the LMS.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from coursehub.catalog.lti.accounts import account_person, account_subjects
from coursehub.catalog.lti.claims import Launch, LaunchRefusedError
from coursehub.catalog.models.courses import Person
from coursehub.catalog.people import find_person


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
