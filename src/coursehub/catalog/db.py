"""Where the catalog lives and how to connect to it.

``COURSEHUB_DATABASE_URL`` names the database (any SQLAlchemy URL;
production: ``postgresql+psycopg://user@host/coursehub``). Without it, the
catalog is the SQLite file ``catalog.sqlite`` in the data directory
(:func:`coursehub.settings.data_dir`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from coursehub.filemodes import ensure_private_sqlite
from coursehub.settings import data_dir

SQLITE_FILENAME = "catalog.sqlite"
#: Mode of the SQLite catalog and its ``-wal``/``-shm`` files: owner only.
CATALOG_FILE_MODE = 0o600


def database_url(environ: Mapping[str, str] | None = None) -> str:
    """Return ``COURSEHUB_DATABASE_URL``, or the SQLite file in the data directory.

    The data directory is :func:`coursehub.settings.data_dir` of the same environment.
    """
    env = os.environ if environ is None else environ
    url = env.get("COURSEHUB_DATABASE_URL", "").strip()
    if url:
        return url
    return f"sqlite:///{data_dir(env) / SQLITE_FILENAME}"


def make_engine(url: str | None = None, **kwargs: Any) -> Engine:
    """Create an engine for ``url`` (default :func:`database_url`).

    SQLite: the parent directory of the file is created (0o700 when new),
    the file and its ``-wal``/``-shm`` are made owner-only (0o600, also
    correcting an older installation: it holds names, e-mails and student
    numbers; :func:`coursehub.filemodes.ensure_private_sqlite`), foreign keys are
    enforced (``PRAGMA foreign_keys=ON``) and the journal is in WAL mode so
    that the web app can read while a roster import writes. ``kwargs`` go to
    :func:`sqlalchemy.create_engine`.
    """
    url = url or database_url()
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, **kwargs)
    if (
        parsed.database
        and parsed.database != ":memory:"
        and not parsed.database.startswith("file:")
    ):
        path = Path(parsed.database).expanduser()
        if not path.parent.is_dir():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        ensure_private_sqlite(path, CATALOG_FILE_MODE)
    engine = create_engine(url, **kwargs)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Return a session factory bound to ``engine``; objects stay usable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """Yield a session; commit when the block ends, roll back and re-raise on an exception."""
    with session_factory(engine)() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
