"""Consistent copies of the databases: SQLite's online backup, PostgreSQL's dump and restore.

A database being written is never copied as a file: a SQLite file (the
catalog, the hub's database, a gradebook) is copied page by page through
SQLite's online backup API (:meth:`sqlite3.Connection.backup`; SQLite,
"Using the SQLite Online Backup API", https://www.sqlite.org/backup.html),
which gives one committed state even while a writer works in WAL mode; a
PostgreSQL catalog is dumped by ``pg_dump --format=custom``, one consistent
snapshot (PostgreSQL docs, "pg_dump": "consistent backups even if the
database is being used concurrently"), and put back by ``pg_restore
--single-transaction``: all of it or nothing.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from coursehub.errors import CoursehubError

#: The first 16 bytes of every SQLite database file (SQLite, "Database File Format", 1.3).
SQLITE_HEADER = b"SQLite format 3\x00"
#: Seconds a SQLite copy waits for a writer's lock before it gives up.
SQLITE_BUSY_TIMEOUT_S = 30.0
#: Seconds ``pg_dump`` or ``pg_restore`` may take.
PG_TIMEOUT_S = 3600.0


class DatabaseCopyError(CoursehubError):
    """A database could not be copied, dumped or restored; the message names it."""


def is_sqlite_file(path: Path) -> bool:
    """Whether ``path`` is a regular file starting with :data:`SQLITE_HEADER`."""
    try:
        with path.open("rb") as stream:
            return stream.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def copy_sqlite(source: Path, target: Path) -> None:
    """Write one consistent copy of the SQLite database ``source`` to the new file ``target``.

    The copy is made with the online backup API in one step (``pages=-1``), so
    it holds one committed state; the source's ``-wal`` is folded in and the
    copy is in rollback-journal mode (``PRAGMA journal_mode=DELETE``), one file.
    The source is opened for writing (``mode=rw``, never created) but not
    written: a read-only connection to a WAL database would leave its
    ``-wal`` and ``-shm`` behind, which the last read-write one removes
    (SQLite, "Write-Ahead Logging", 2.2; as root SQLite gives them the
    database's owner).

    Raises
    ------
    DatabaseCopyError
        If SQLite cannot read ``source`` (locked longer than
        :data:`SQLITE_BUSY_TIMEOUT_S` seconds, damaged, not a database).
    """
    try:
        src = sqlite3.connect(f"file:{source}?mode=rw", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise DatabaseCopyError(f"cannot open the SQLite database {source}: {exc}") from exc
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
    except sqlite3.Error as exc:
        raise DatabaseCopyError(f"cannot copy the SQLite database {source}: {exc}") from exc
    finally:
        src.close()


def libpq_url(url: str) -> tuple[str, dict[str, str]]:
    """Return a libpq connection URI for a SQLAlchemy PostgreSQL ``url`` and its environment.

    The driver (``+psycopg``) is dropped; a password moves to ``PGPASSWORD``
    so that it never shows in a process list (PostgreSQL docs, "Environment
    Variables" of libpq).

    Returns
    -------
    (str, dict)
        The URI (``postgresql://user@host/db?host=...``) and the variables to add.
    """
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    extra = {"PGPASSWORD": parsed.password} if parsed.password else {}
    plain = parsed.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), extra


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise DatabaseCopyError(
            f"{name} not found on PATH: install PostgreSQL's client (apt-get install "
            "postgresql-client)"
        )
    return found


def _run_pg(argv: list[str], what: str, extra_env: dict[str, str]) -> None:
    env = {**os.environ, **extra_env}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PG_TIMEOUT_S, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise DatabaseCopyError(
            f"{what}: {Path(argv[0]).name} ran over {PG_TIMEOUT_S:g} s"
        ) from exc
    if done.returncode != 0:
        tail = " ".join(done.stderr.split())[-600:]
        raise DatabaseCopyError(f"{what}: {Path(argv[0]).name} failed: {tail}")


def dump_postgresql(url: str, target: Path, where: str) -> None:
    """Dump the PostgreSQL database ``url`` to ``target`` with ``pg_dump --format=custom``.

    Owners and privileges are left out (``--no-owner --no-privileges``): the
    restore makes every object the restoring role's, as on a fresh host.

    Raises
    ------
    DatabaseCopyError
        ``pg_dump`` missing, failing (its message, shortened) or running over
        :data:`PG_TIMEOUT_S` seconds; ``where`` names the database.
    """
    uri, extra = libpq_url(url)
    argv = [_pg_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges"]
    _run_pg([*argv, f"--file={target}", f"--dbname={uri}"], f"dumping {where}", extra)


def restore_postgresql(url: str, dump: Path, where: str, *, clean: bool) -> None:
    """Load the dump ``dump`` into the PostgreSQL database ``url``, in one transaction.

    ``clean``: drop the dump's objects first (``--clean --if-exists``), for a
    forced restore over a catalog that holds tables.

    Raises
    ------
    DatabaseCopyError
        ``pg_restore`` missing or failing; the database is then as it was
        (``--single-transaction``, ``--exit-on-error``).
    """
    uri, extra = libpq_url(url)
    argv = [_pg_tool("pg_restore"), "--single-transaction", "--exit-on-error", "--no-owner"]
    argv += ["--no-privileges", *(["--clean", "--if-exists"] if clean else [])]
    _run_pg([*argv, f"--dbname={uri}", str(dump)], f"restoring {where}", extra)


def set_role_password(url: str, password: str) -> None:
    """Give the role that ``url`` signs in as the password ``password``
    (``ALTER ROLE CURRENT_USER PASSWORD``: a role may change its own).

    Raises
    ------
    DatabaseCopyError
        If the database cannot be reached or refuses the change.
    """
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError

    literal = "'" + password.replace("'", "''") + "'"  # a string constant, as SQL quotes one
    engine = create_engine(url)
    try:
        with engine.begin() as db:
            db.exec_driver_sql(f"ALTER ROLE CURRENT_USER PASSWORD {literal}")
    except SQLAlchemyError as exc:
        raise DatabaseCopyError(f"cannot set the catalog role's password: {exc}") from exc
    finally:
        engine.dispose()


def align_role_password(url: str, env_file: Path) -> None:
    """Give the role of the PostgreSQL catalog ``url`` the password that the restored
    ``secrets.env`` ``env_file`` names (``COURSEHUB_DB_PASSWORD``), where it is not the
    one ``url`` holds: a new install made its own, and its units read the restored file.

    Raises
    ------
    DatabaseCopyError
        If the password cannot be set; the message says that everything else is restored.
    """
    from sqlalchemy.engine import make_url

    from coursehub.deploy.files import read_env_file

    password = read_env_file(env_file).get("COURSEHUB_DB_PASSWORD")
    if not password or password == make_url(url).password:
        return
    try:
        set_role_password(url, password)
    except DatabaseCopyError as exc:
        raise DatabaseCopyError(
            f"every part is restored, but {env_file} names another password than the "
            f"catalog role's, and {exc}: give the role that password as the postgres "
            "account (ALTER ROLE ... PASSWORD)"
        ) from exc


def postgresql_tables(url: str) -> list[str]:
    """Return the tables of the PostgreSQL database ``url`` outside the system schemas.

    Raises
    ------
    DatabaseCopyError
        If the database cannot be reached.
    """
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.exc import SQLAlchemyError

    engine = create_engine(url)
    try:
        return list(inspect(engine).get_table_names())
    except SQLAlchemyError as exc:
        raise DatabaseCopyError(f"cannot read the catalog database: {exc}") from exc
    finally:
        engine.dispose()
