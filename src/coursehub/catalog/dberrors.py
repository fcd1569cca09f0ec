"""Database errors turned into messages that name the broken rule and never a value.

:func:`retry_on_conflict` is the one answer to a lost race on a unique rule
(two course apps creating the same person, membership or group at once):
run the change again once, then refuse it with a clear one-line
:class:`~coursehub.catalog.errors.ConflictError` (HTTP 409), never a 500.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def describe_db_error(exc: Any) -> str:
    """Return what a database error broke, without any value it quotes (no personal data).

    ``"unique rule people.student_number"`` for SQLite's ``UNIQUE constraint
    failed: people.student_number``, ``"unique rule uq_people_student_number"``
    for PostgreSQL's ``duplicate key value violates unique constraint
    "uq_people_student_number"`` (its DETAIL line, which quotes the value, is
    dropped); else the error's class, e.g. ``"DataError"``.
    """
    text = str(exc.orig)
    kind = "unique" if re.search(r"unique|duplicate", text, re.IGNORECASE) else "integrity"
    name = re.search(r'constraint "([A-Za-z0-9_.]+)"|constraint failed: ([A-Za-z0-9_.]+)', text)
    from sqlalchemy.exc import IntegrityError

    if isinstance(exc, IntegrityError):
        return f"{kind} rule {name[1] or name[2]}" if name else f"{kind} rule"
    return type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__


#: How many times a change that lost a race is run again before it is refused.
CONFLICT_RETRIES = 1


def describe_lost_race(what: str, exc: Any) -> str:
    """Return the one-line refusal of a change that lost a race twice (pure).

    ``what`` names the change and its subject (``"adding tw001 to MLMECA-2025"``);
    the database error gives only the rule it broke (:func:`describe_db_error`).
    """
    return (
        f"{what}: not saved, another request made the same change at the same time "
        f"({describe_db_error(exc)}); try again"
    )


def retry_on_conflict(session: Any, work: Callable[[], T], what: str, commit: bool = True) -> T:
    """Run ``work`` and commit (or flush); when a concurrent writer won a race, run it once more.

    Two requests (two course apps on one catalog, two browser tabs) that
    create the same person, membership or group at once both see it missing;
    the second to write breaks a unique rule. After a rollback the change is
    run again on the catalog as it now is (the person found, the membership
    updated), at most :data:`CONFLICT_RETRIES` more times.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        The session ``work`` writes with; rolled back on any error.
    work : callable
        The change (no arguments); run again from scratch after a lost race.
    what : str
        The change and the person or group it is about, for the refusal.
    commit : bool
        Commit after ``work`` (default), else only flush: the caller commits.

    Returns
    -------
    object
        What ``work`` returned on the attempt that was written.

    Raises
    ------
    ConflictError
        The change lost the race every time (:func:`describe_lost_race`).
    """
    from sqlalchemy.exc import IntegrityError

    from coursehub.catalog.errors import ConflictError

    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            result = work()
            session.commit() if commit else session.flush()
            return result
        except IntegrityError as exc:
            session.rollback()
            if attempt == CONFLICT_RETRIES:
                raise ConflictError(describe_lost_race(what, exc)) from None
        except BaseException:
            session.rollback()
            raise
    raise AssertionError("unreachable")  # pragma: no cover
