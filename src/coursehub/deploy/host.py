"""The steps of ``coursehub deploy`` that run programs: TLS pair, PostgreSQL, migration, doctor.

- A trial TLS pair: ``openssl req -x509 -newkey rsa:2048 -nodes`` (openssl-req(1)),
  valid :data:`TRIAL_DAYS` days, its subject saying it is a coursehub trial.
- A local PostgreSQL role and database (Debian package ``postgresql``; the
  ``postgres`` account's peer authentication, pg_hba.conf(5)): ``createuser``,
  ``createdb --owner`` and ``ALTER ROLE ... PASSWORD`` through ``runuser -u postgres``.
- The catalog migrated in this process (:func:`coursehub.catalog.schema.upgrade_database`).
- ``python -m coursehub doctor``, last, with the install's settings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from coursehub.errors import CoursehubError

#: Days a trial certificate is valid.
TRIAL_DAYS = 90
#: The PostgreSQL role and database of the catalog.
PG_NAME = "coursehub"


class DeployError(CoursehubError):
    """A step of the install failed: the message names the step and the program's last line."""


def _run(argv: list[str], step: str, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    except FileNotFoundError as exc:
        raise DeployError(f"{step}: {argv[0]} is not installed") from exc
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise DeployError(f"{step}: {argv[0]} failed: {lines[-1] if lines else exc}") from exc
    return done.stdout


def make_trial_pair(cert: Path, key: Path, hostname: str) -> None:
    """Write a self-signed certificate and its key (0600) for ``hostname``.

    Raises
    ------
    DeployError
        If ``openssl`` is missing or fails (Debian: apt-get install openssl).
    """
    cert.parent.mkdir(parents=True, exist_ok=True)
    _run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
            "-days", str(TRIAL_DAYS),
            "-subj", f"/CN={hostname}/O=coursehub TRIAL self-signed",
            "-addext", f"subjectAltName=DNS:{hostname}",
            "-keyout", str(key), "-out", str(cert),
        ],
        "trial TLS pair",
    )  # fmt: skip
    os.chmod(key, 0o600)
    os.chmod(cert, 0o644)


def _psql(sql: str) -> str:
    argv = ["runuser", "-u", "postgres", "--", "psql", "-XtAq", "-v", "ON_ERROR_STOP=1"]
    return _run([*argv, "-c", sql], "PostgreSQL").strip()


def postgres_missing() -> list[str]:
    """Return what the local PostgreSQL lacks: ``role``, ``database`` (none: both exist).

    Raises
    ------
    DeployError
        If ``psql`` cannot run as ``postgres`` (Debian: apt-get install postgresql).
    """
    missing = []
    if _psql(f"SELECT 1 FROM pg_roles WHERE rolname = '{PG_NAME}'") != "1":
        missing.append("role")
    if _psql(f"SELECT 1 FROM pg_database WHERE datname = '{PG_NAME}'") != "1":
        missing.append("database")
    return missing


def ensure_postgres(password: str) -> list[str]:
    """Create the catalog's role and database if missing, set the role's password.

    Returns
    -------
    list of str
        What was made: ``role``, ``database``.
    """
    missing = postgres_missing()
    if "role" in missing:
        _run(["runuser", "-u", "postgres", "--", "createuser", PG_NAME], "PostgreSQL role")
    _psql(f"ALTER ROLE {PG_NAME} PASSWORD '{password}'")
    if "database" in missing:
        argv = ["runuser", "-u", "postgres", "--", "createdb", "--owner", PG_NAME, PG_NAME]
        _run(argv, "PostgreSQL database")
    return missing


def pending_migration(url: str) -> tuple[str | None, str]:
    """Return the catalog's revision (None: empty or missing) and the newest one."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.schema import current_revision, head_revision

    with open_catalog(url, check_schema=False) as engine:
        return current_revision(engine), head_revision()


def migrate(url: str) -> str:
    """Migrate the catalog at ``url`` to the newest revision; return it."""
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.schema import current_revision, upgrade_database

    with open_catalog(url, check_schema=False) as engine:
        upgrade_database(engine)
        return str(current_revision(engine))


def run_doctor(python: str, env: dict[str, str]) -> tuple[int, str]:
    """Run ``coursehub doctor`` with ``env`` added; return its exit status and output."""
    argv = [python if Path(python).exists() else sys.executable, "-m", "coursehub", "doctor"]
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, **env}, check=False
    )
    return done.returncode, (done.stdout + done.stderr).rstrip()


#: Where ``npm install --prefix VENV/node configurable-http-proxy`` puts the proxy (the Makefile).
VENV_PROXY = "node/node_modules/.bin/configurable-http-proxy"


def find_proxy(python: str = sys.executable) -> str:
    """Return the ``configurable-http-proxy`` to run, or "" when there is none.

    The one on the PATH, else the one npm installed in the virtual environment
    of ``python`` (``VENV/node/node_modules/.bin``, as ``make setup`` does), else
    in this process's (``sys.prefix``). ``python`` is not resolved: a venv's
    ``bin/python`` is a link to the base interpreter.
    """
    found = shutil.which("configurable-http-proxy")
    if found:
        return found
    for venv in (Path(python).parent.parent, Path(sys.prefix)):
        candidate = venv / VENV_PROXY
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return ""
