"""The catalog's schema version: Alembic migrations shipped in the package.

The migration scripts live in ``coursehub/catalog/migrations``; Alembic is
configured here in code (no ``alembic.ini`` to find). ``coursehub db upgrade``
runs :func:`upgrade_database`; the web app calls :func:`check_schema` at
start-up and refuses to serve an empty or outdated database.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from coursehub.catalog.errors import SchemaError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(engine: Engine) -> Config:
    """Return an Alembic configuration whose migrations run on ``engine``.

    The engine travels in ``config.attributes["engine"]``, so an in-memory or
    test database is migrated on that very engine.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    url = engine.url.render_as_string(hide_password=False)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # configparser escaping
    config.attributes["engine"] = engine
    return config


def head_revision() -> str:
    """Return the newest migration's revision id."""
    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    if head is None:  # pragma: no cover - the package always ships migrations
        raise SchemaError(f"no migration scripts found in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """Return the database's migration revision, or None for an empty database."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade_database(engine: Engine, revision: str = "head") -> None:
    """Migrate the database up to ``revision`` (default: the newest); a no-op when it is there."""
    command.upgrade(alembic_config(engine), revision)


def check_schema(engine: Engine) -> None:
    """Check that the database is at the newest migration.

    Raises
    ------
    SchemaError
        If the database is empty, older than the code, or unknown to it (a
        newer coursehub migrated it); the message says to run
        ``coursehub db upgrade``.
    """
    current, head = current_revision(engine), head_revision()
    if current == head:
        return
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        raise SchemaError(f"the catalog database {where} is empty: run `coursehub db upgrade`")
    known = {script.revision for script in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()}
    if current not in known:
        raise SchemaError(
            f"the catalog database {where} is at revision {current}, unknown to this "
            f"coursehub (newest {head}): upgrade coursehub"
        )
    raise SchemaError(
        f"the catalog database {where} is at revision {current}, older than {head}: "
        "run `coursehub db upgrade`"
    )
