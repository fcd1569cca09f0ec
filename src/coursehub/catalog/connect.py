"""The one way a command opens the catalog: engine, first connection, schema check.

Every ``coursehub`` command that reads or writes the catalog opens it with
:func:`open_catalog`, so that an unreachable database or an outdated schema
is one line naming the database (without its password), the same for all.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine

from coursehub.catalog.db import make_engine
from coursehub.errors import CoursehubError


class CatalogUnreachableError(CoursehubError):
    """The catalog database refused the first connection."""


def describe_unreachable(where: str, exc: BaseException) -> str:
    """Return the one line of a catalog database that refused the connection (pure).

    Parameters
    ----------
    where : str
        The database's URL without its password.
    exc : BaseException
        The driver's error; SQLAlchemy's ``DBAPIError`` carries it as ``orig``.

    Returns
    -------
    str
        ``"cannot open the catalog database <where>: <first line of the error>"``.
    """
    orig = getattr(exc, "orig", None) or exc
    detail = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return f"cannot open the catalog database {where}: {detail}"


@contextmanager
def open_catalog(url: str | None = None, *, check_schema: bool = True) -> Iterator[Engine]:
    """Yield an engine on the catalog once it answered and its schema is current.

    Parameters
    ----------
    url : str, optional
        A SQLAlchemy URL; None: :func:`coursehub.catalog.db.database_url`.
    check_schema : bool, optional
        Whether to refuse a database that is not at the newest migration (default
        True; ``coursehub db upgrade`` and ``coursehub db current`` pass False).

    Yields
    ------
    sqlalchemy.Engine
        Disposed of when the block ends.

    Raises
    ------
    CatalogUnreachableError
        The database refuses the connection (server down, wrong host or password,
        unreadable SQLite file): one line, the URL without its password and the
        driver's first line.
    coursehub.catalog.errors.SchemaError
        With ``check_schema``: the database is empty, older or newer than the code
        (:func:`coursehub.catalog.schema.check_schema`).
    """
    from sqlalchemy.exc import DBAPIError

    from coursehub.catalog import schema

    engine = make_engine(url)
    try:
        try:
            with engine.connect():
                pass
        except DBAPIError as exc:
            where = engine.url.render_as_string(hide_password=True)
            raise CatalogUnreachableError(describe_unreachable(where, exc)) from None
        if check_schema:
            schema.check_schema(engine)
        yield engine
    finally:
        engine.dispose()
