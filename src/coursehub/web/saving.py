"""The commit step of every change made by a page or an API call.

The catalog's services flush and never commit (:mod:`coursehub.catalog.courses`):
the request commits. :func:`committing` runs the changes and commits, rolling
back on any error; the API lets a :class:`~coursehub.errors.CoursehubError`
through (answered 400/403/404/409 as JSON). :func:`commit_or_show` does the
same for a page, and shows the error to the user instead (next to a form's
field, else as a flash message), never a traceback::

    with commit_or_show(session, form, "name") as saved:
        add_group(session, course, form.name.data, form.kind.data)
    if saved:
        return redirect(...)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from flask import flash
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from wtforms import Form

from coursehub.catalog.dberrors import describe_lost_race
from coursehub.catalog.errors import ConflictError
from coursehub.errors import CoursehubError


@contextmanager
def committing(session: Session) -> Iterator[None]:
    """Run the block, then commit; on any error roll back and re-raise it.

    Raises
    ------
    ConflictError
        A unique rule broken by a concurrent request (HTTP 409, the rule
        named, never a value), instead of the database's IntegrityError.
        Changes that create people, memberships or groups run through
        :func:`~coursehub.catalog.dberrors.retry_on_conflict` first, which
        runs them again once and names the person or group.
    """
    try:
        yield
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise ConflictError(describe_lost_race("this change", exc)) from None
    except BaseException:
        session.rollback()
        raise


class Saved:
    """What :func:`commit_or_show` did: true once committed; ``error`` the refusal shown."""

    def __init__(self) -> None:
        self.error: CoursehubError | None = None
        self.done = False

    def __bool__(self) -> bool:
        return self.done


@contextmanager
def commit_or_show(
    session: Session, form: Form | None = None, field: str | None = None
) -> Iterator[Saved]:
    """Run the block and commit (:func:`committing`); show a service error instead of raising.

    Parameters
    ----------
    session : Session
        The request's session.
    form, field : Form and str, optional
        Where to show the error (:func:`show_error`); else a flash message.

    Yields
    ------
    Saved
        True after the commit; on a :class:`~coursehub.errors.CoursehubError`
        false, with ``error`` set (changes rolled back, the rest of the block
        skipped). Other errors propagate (after the rollback).
    """
    saved = Saved()
    try:
        with committing(session):
            yield saved
    except CoursehubError as exc:
        saved.error = exc
        show_error(exc, form, field)
    else:
        saved.done = True


def show_error(exc: CoursehubError, form: Form | None = None, field: str | None = None) -> None:
    """Show a service error next to ``form[field]``, else as a flash message."""
    if form is not None and field is not None and field in form:
        form[field].errors = [*form[field].errors, str(exc)]
        return
    flash(str(exc), "error")
