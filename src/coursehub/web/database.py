"""The catalog database as the web app sees it: one engine per app, one session per request."""

from __future__ import annotations

from typing import cast

from flask import Flask, current_app, g
from sqlalchemy.orm import Session, sessionmaker

from coursehub.catalog.db import database_url, make_engine, session_factory
from coursehub.catalog.schema import check_schema

ENGINE_KEY = "coursehub.engine"
SESSIONS_KEY = "coursehub.sessions"


def init_app(app: Flask) -> None:
    """Create the app's engine and check the schema before serving anything.

    Raises
    ------
    coursehub.catalog.errors.SchemaError
        If ``CHECK_SCHEMA`` is on and the database is empty or outdated; the
        message names ``coursehub db upgrade``.
    """
    url = app.config.get("DATABASE_URL") or database_url()
    engine = make_engine(url)
    if app.config.get("CHECK_SCHEMA", True):
        try:
            check_schema(engine)
        except Exception:
            engine.dispose()
            raise
    app.extensions[ENGINE_KEY] = engine
    app.extensions[SESSIONS_KEY] = session_factory(engine)
    app.teardown_appcontext(close_session)


def get_session() -> Session:
    """Return the request's session, opening it on first use; closed at teardown."""
    if "db_session" not in g:
        factory = cast(sessionmaker[Session], current_app.extensions[SESSIONS_KEY])
        g.db_session = factory()
    return cast(Session, g.db_session)


def close_session(_exc: BaseException | None = None) -> None:
    """Close the request's session (rolling back anything not committed)."""
    session = g.pop("db_session", None)
    if session is not None:
        session.close()
