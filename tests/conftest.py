"""Shared test fixtures.

Databases
---------
Every test that touches the catalog runs twice: on SQLite and on a real
PostgreSQL server (marked ``integration``; skipped, with the reason, when the
PostgreSQL binaries are not installed). Fixtures:

``database_url``
    URL of a fresh database for this test, migrated to the newest revision
    and empty. Parametrised by backend (fixture ``database_backend``): the
    test id contains ``sqlite`` or ``postgresql``; ``pytest -m "not
    integration"`` runs the SQLite half only.
``blank_database_url``
    URL of a fresh database with no table at all (for migration tests).
``engine``
    A :func:`coursehub.catalog.db.make_engine` engine on ``database_url``,
    disposed after the test.
``session``
    A session on ``engine``, closed (uncommitted work rolled back) after the test.

The PostgreSQL server (``postgres_server``, one per test session) is made with
``initdb`` and ``pg_ctl`` in a temporary directory, listening on a free port
of 127.0.0.1 and on a Unix socket in that directory, with durability off
(``fsync=off``) for speed. As root it runs as the ``postgres`` Unix user
(``runuser -u postgres --``), since PostgreSQL refuses to run as root. Each
test gets its own database, copied from a migrated template
(``CREATE DATABASE ... TEMPLATE``), dropped afterwards. The binaries are
looked up in ``COURSEHUB_PG_BINDIR``, then ``/usr/lib/postgresql/*/bin``
(Debian), then ``PATH``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

# The real-JupyterHub fixture ``hub`` (tests/hubfixture.py) and the real-Slurm
# fixture ``slurm_cluster`` (tests/slurmfixture.py).
pytest_plugins = ["hubfixture", "slurmfixture", "suiteorder", "appbrowser"]

from cgrouptree import remove_cgroup_tree  # noqa: E402
from helpers import free_port  # noqa: E402

PG_TEMPLATE = "coursehub_template"


def _pg_bindir() -> Path | None:
    candidates = [os.environ.get("COURSEHUB_PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("pg_ctl")
    candidates.append(str(Path(on_path).parent) if on_path else "")
    for candidate in filter(None, candidates):
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    return None


class PostgresServer:
    """A throwaway PostgreSQL cluster: ``initdb`` + ``pg_ctl`` in a temporary directory."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="coursehub-pg-"))
        self.port = free_port()
        self.as_user: list[str] = []
        self.version = 0
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self.as_user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.strip()}\n{tail}")

    def start(self) -> None:
        """Create the cluster and start the server; wait until it accepts connections."""
        data = self.root / "data"
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(self.root / "log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        """Stop the server and delete its files."""
        try:
            self._run(
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.root / "data"),
                "-m",
                "immediate",
                "-w",
                "stop",
            )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str) -> str:
        """SQLAlchemy URL of ``database`` on this server, through the Unix socket."""
        return f"postgresql+psycopg://postgres@/{database}?host={self.root}&port={self.port}"

    def execute(self, sql: str) -> int:
        """Run one statement outside a transaction; return the server version (150004: 15.4)."""
        import psycopg

        with psycopg.connect(
            host=str(self.root), port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql)
            return int(conn.info.server_version)

    def create_database(self, name: str, template: str | None = None) -> None:
        """Create a database, copying ``template`` file by file (fast with ``fsync=off``)."""
        sql = f"CREATE DATABASE {name}"
        if template:
            # PostgreSQL 15's default WAL_LOG strategy is ~6x slower for a small template.
            sql += f" TEMPLATE {template}" + (
                " STRATEGY FILE_COPY" if self.version >= 150000 else ""
            )
        self.execute(sql)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the test session, with a migrated template database."""
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    server = PostgresServer(bindir)
    server.start()
    try:
        server.version = server.execute("SELECT 1")
        server.create_database(PG_TEMPLATE)
        _migrate(server.url(PG_TEMPLATE))
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite catalog file that tests copy."""
    path = tmp_path_factory.mktemp("sqlite-template") / "catalog.sqlite"
    _migrate(f"sqlite:///{path}")
    return path


def _migrate(url: str) -> None:
    from coursehub.catalog.db import make_engine
    from coursehub.catalog.schema import upgrade_database

    engine = make_engine(url)
    try:
        upgrade_database(engine)
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def database_backend(request: pytest.FixtureRequest) -> str:
    """``"sqlite"`` or ``"postgresql"``: the backend of this test's database."""
    return str(request.param)


def _fresh_database(request: pytest.FixtureRequest, backend: str, migrated: bool) -> Iterator[str]:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    if backend == "sqlite":
        path = tmp_path / "catalog.sqlite"
        if migrated:
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"test_{uuid.uuid4().hex[:16]}"
    server.create_database(name, PG_TEMPLATE if migrated else None)
    try:
        yield server.url(name)
    finally:
        server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def database_url(request: pytest.FixtureRequest, database_backend: str) -> Iterator[str]:
    """URL of a fresh, migrated, empty catalog database (SQLite and PostgreSQL)."""
    yield from _fresh_database(request, database_backend, migrated=True)


@pytest.fixture
def blank_database_url(request: pytest.FixtureRequest, database_backend: str) -> Iterator[str]:
    """URL of a fresh database without any table (SQLite and PostgreSQL)."""
    yield from _fresh_database(request, database_backend, migrated=False)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on ``database_url``, disposed after the test."""
    from coursehub.catalog.db import make_engine

    db_engine = make_engine(database_url)
    try:
        yield db_engine
    finally:
        db_engine.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """A session on ``engine``; uncommitted work is rolled back after the test."""
    from coursehub.catalog.db import session_factory

    with session_factory(engine)() as db_session:
        yield db_session


@pytest.fixture
def cgroup_parent() -> Iterator[str]:
    """Name of a fresh parent cgroup for job cgroups (tests marked ``root``), removed after.

    Skips unless running as root with writable cpu and memory cgroup controllers
    (v1 or v2). Whatever the test leaves inside is killed and removed.
    """
    from coursehub.resources.cgroups import CgroupUnavailableError, job_cgroup_bases

    if os.geteuid() != 0:
        pytest.skip("needs root to make cgroups")
    try:
        _, cpu_base, mem_base = job_cgroup_bases()
        name = f"coursehub-test-{uuid.uuid4().hex[:8]}"
        parents = sorted({cpu_base / name, mem_base / name})
        for parent in parents:
            parent.mkdir()
    except (CgroupUnavailableError, OSError) as exc:
        pytest.skip(f"no writable cgroup filesystem: {exc}")
    yield name
    for parent in parents:
        remove_cgroup_tree(parent)


@pytest.fixture
def pages(client: object) -> object:
    """:class:`helpers.PageActions` on the course app's test client (``client``)."""
    from helpers import PageActions

    return PageActions(client)


@pytest.fixture(scope="session")
def sqlite_web_template(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Path:
    """A copy of ``sqlite_template`` seeded with the web fixtures' catalog, that ``app`` copies."""
    from coursehub.web.testing import seed_web_catalog

    path = tmp_path_factory.mktemp("sqlite-web-template") / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    seed_web_catalog(f"sqlite:///{path}")
    return path


def _copy_seeded_sqlite(request: pytest.FixtureRequest, url: str) -> bool:
    """Seed an untouched SQLite copy of ``sqlite_template`` by copying ``sqlite_web_template``.

    Seeding takes a fresh engine and some 60 statements (0.2-0.5 s); a copy, a
    millisecond. Only a file byte for byte equal to the template, with no
    ``-wal`` or ``-shm`` beside it (no connection open or ever written
    through), is replaced; anything else is seeded as such (False).
    """
    import filecmp

    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return False
    path = Path(url.removeprefix(prefix))
    side_files = (path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))
    if any(side.exists() for side in side_files):
        return False
    if not filecmp.cmp(path, request.getfixturevalue("sqlite_template"), shallow=False):
        return False
    shutil.copyfile(request.getfixturevalue("sqlite_web_template"), path)
    return True


@pytest.fixture
def app(request: pytest.FixtureRequest, database_url: str) -> Iterator[object]:
    """The course web app in test mode on a fresh database seeded with the web fixtures'
    catalog (``coursehub.web.testing.seed_web_catalog``), disposed of afterwards."""
    from coursehub.web.testing import dispose_app, make_test_app, seed_web_catalog

    if not _copy_seeded_sqlite(request, database_url):
        seed_web_catalog(database_url)
    application = make_test_app(database_url)
    yield application
    dispose_app(application)


@pytest.fixture
def client(app: object) -> object:
    """A Flask test client of :func:`app`."""
    return app.test_client()  # type: ignore[attr-defined]


@pytest.fixture(scope="session", autouse=True)
def grader_account() -> Iterator[str | None]:
    """A throwaway sandbox account for sandboxed jobs as root (``chtest-grader-...``).

    As root, the sandbox creates its account when it is missing
    (:func:`coursehub.sandbox.account.ensure_sandbox_account`); the suite names
    its own through ``COURSEHUB_GRADER_USER`` so that it never leaves
    ``coursehub-grader`` on the machine, and deletes it at the end.
    """
    if os.geteuid() != 0 or os.environ.get("COURSEHUB_GRADER_USER"):
        yield os.environ.get("COURSEHUB_GRADER_USER")
        return
    name = f"chtest-grader-{uuid.uuid4().hex[:6]}"
    os.environ["COURSEHUB_GRADER_USER"] = name
    try:
        yield name
    finally:
        del os.environ["COURSEHUB_GRADER_USER"]
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture(scope="session", autouse=True)
def formgrader_accounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the session, delete the formgrader accounts its hubs created (root).

    A demo or a hub rendered as root gives each course's formgrader its own
    account and group, ``fg-<hub_id>-<course_id>``
    (:mod:`coursehub.grading.formgrader.account`), kept on the host on purpose.
    Those whose home lies in this session's temporary folders are the tests'
    (this worker's folders only, when the suite runs in parallel).
    """
    yield
    if os.geteuid() != 0:
        return
    # this process's own folder: under pytest-xdist each worker has its own, and the
    # others' hubs may still be running
    base = str(tmp_path_factory.getbasetemp())
    for entry in pwd.getpwall():
        if entry.pw_name.startswith("fg-") and entry.pw_dir.startswith(base):
            subprocess.run(["userdel", entry.pw_name], check=False, capture_output=True)
            subprocess.run(["groupdel", entry.pw_name], check=False, capture_output=True)


@pytest.fixture(scope="session", autouse=True)
def private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point coursehub's default data directory at a temporary folder for the session.

    Code that falls back to ``COURSEHUB_DATA_DIR`` (default
    ``~/.local/share/coursehub``: the books, the material mirrors, the usage
    journals of an app made without those settings) then never writes into
    the home of whoever runs the tests. A value already set is kept.
    """
    if os.environ.get("COURSEHUB_DATA_DIR"):
        yield Path(os.environ["COURSEHUB_DATA_DIR"])
        return
    path = tmp_path_factory.mktemp("coursehub-data")
    os.environ["COURSEHUB_DATA_DIR"] = str(path)
    try:
        yield path
    finally:
        del os.environ["COURSEHUB_DATA_DIR"]


@pytest.fixture(autouse=True)
def collect_integration_sockets(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test with real servers (or a slow one), collect the client sockets it left open.

    Integration tests open many HTTP sessions to hubs, servers and the course
    app (``requests.Session``, websockets). One left to the garbage collector
    warns (``ResourceWarning``) in whichever later test happens to collect it;
    collecting after each such test keeps the warning out of unrelated tests.
    """
    yield
    if any(request.node.get_closest_marker(m) for m in ("integration", "slow", "slurm")):
        from coursehub.web.testing import collect_dropped_connections

        collect_dropped_connections()


@pytest.fixture
def sandbox_user(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh sandbox account name (``chtest-s...``) for one test, deleted afterwards (root only).

    ``COURSEHUB_GRADER_USER`` names it for the test; the account itself is
    made by whatever the test runs (:func:`coursehub.sandbox.account.ensure_sandbox_account`).
    """
    if os.geteuid() != 0:
        pytest.skip("needs root to create the sandbox account")
    name = f"chtest-s{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("COURSEHUB_GRADER_USER", name)
    yield name
    subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A fresh folder every account may enter (0755 under ``/tmp``), removed after the test.

    pytest's own ``tmp_path`` lies in a 0700 folder, which a job run as the
    sandbox account (``coursehub.sandbox``) cannot enter.
    """
    folder = Path(tempfile.mkdtemp(prefix="chtest-open-"))
    folder.chmod(0o755)
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)
