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


def known_revisions() -> set[str]:
    """Return the revision ids of every migration this coursehub ships."""
    return {script.revision for script in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()}


def plan_refusal(
    where: str, current: str | None, known: set[str], head: str, has_tables: bool
) -> str | None:
    """Return why the catalog at ``where`` cannot be migrated as it is, or None (pure).

    Refused: tables without a recorded revision (``alembic_version``
    missing or empty: its revision was lost, or coursehub did not make it),
    and a revision this coursehub does not know (a newer coursehub
    migrated it, or the version was overwritten).
    """
    if current is None and has_tables:
        return (
            f"the catalog database {where} has tables but no schema revision (its "
            "alembic_version table is missing or empty): restore it from a backup, or "
            "use an empty database"
        )
    if current is not None and current not in known:
        return (
            f"the catalog database {where} is at revision {current}, unknown to this "
            f"coursehub (newest {head}): upgrade coursehub, or restore the database from a backup"
        )
    return None


def describe_migration_failure(where: str, current: str | None, exc: BaseException) -> str:
    """Return the one-line refusal of a migration the database refused (pure).

    ``exc`` is the database's error (its first line is kept: the DDL
    statement's complaint, no row values) or Alembic's.
    """
    orig = getattr(exc, "orig", None) or exc
    detail = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return (
        f"migrating the catalog database {where} from revision {current or '(empty)'} failed "
        f"({type(orig).__name__}: {detail}): its tables do not match the revision it "
        "records; restore it from a backup"
    )


def upgrade_database(engine: Engine, revision: str = "head") -> None:
    """Migrate the database up to ``revision`` (default: the newest); a no-op when it is there.

    Raises
    ------
    SchemaError
        The database cannot be migrated (:func:`plan_refusal`: nothing is
        done), or a migration failed on it (:func:`describe_migration_failure`:
        its tables did not match its recorded revision).
    """
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    where = engine.url.render_as_string(hide_password=True)
    current = current_revision(engine)
    refusal = plan_refusal(where, current, known_revisions(), head_revision(), _has_tables(engine))
    if refusal is not None:
        raise SchemaError(refusal)
    try:
        command.upgrade(alembic_config(engine), revision)
    except (SQLAlchemyError, CommandError) as exc:  # DBAPIError, CircularDependencyError
        raise SchemaError(describe_migration_failure(where, current, exc)) from None


def _has_tables(engine: Engine) -> bool:
    """Whether the database holds tables other than ``alembic_version``."""
    from sqlalchemy import inspect

    return bool(set(inspect(engine).get_table_names()) - {"alembic_version"})


def check_schema(engine: Engine) -> None:
    """Check that the database is at the newest migration.

    Raises
    ------
    SchemaError
        If the database is empty or older than the code (the message says to
        run ``coursehub db upgrade``), at a revision unknown to it (a newer
        coursehub migrated it), or holds tables without a revision
        (:func:`plan_refusal`).
    """
    current, head = current_revision(engine), head_revision()
    if current == head:
        return
    where = engine.url.render_as_string(hide_password=True)
    refusal = plan_refusal(where, current, known_revisions(), head, _has_tables(engine))
    if refusal is not None:
        raise SchemaError(refusal)
    if current is None:
        raise SchemaError(f"the catalog database {where} is empty: run `coursehub db upgrade`")
    raise SchemaError(
        f"the catalog database {where} is at revision {current}, older than {head}: "
        "run `coursehub db upgrade`"
    )
