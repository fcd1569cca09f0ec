"""coursehub backup and restore, for real: a course with its catalog, hub, gradebook,
submissions, material credential, LTI key and usage records is backed up, its
folders deleted, and restored into fresh ones (SQLite and PostgreSQL); a damaged
or foreign archive is refused, naming the member, and nothing is written."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, select, text

from coursehub.cli import main
from coursehub.errors import CoursehubError

PS = "ps1"
#: The students who hand in, and the manual score each gets on every graded cell.
SCORES = {"p2500001": 1.0, "p2500002": 0.5}


@dataclass(frozen=True)
class Site:
    """The folders of one installation, below ``root``, and its catalog's URL."""

    root: Path
    database_url: str

    @property
    def hub_dir(self) -> Path:
        return self.root / "hub"

    def env(self) -> dict[str, str]:
        return {
            "COURSEHUB_DATA_DIR": str(self.root / "data"),
            "COURSEHUB_DATABASE_URL": self.database_url,
            "COURSEHUB_GRADING_COURSES": str(self.root / "courses"),
            "COURSEHUB_GRADING_EXCHANGE": str(self.root / "exchange"),
            "COURSEHUB_USAGE_DIR": str(self.root / "usage"),
            "COURSEHUB_GRADING_SINGLE_USER": "1",
        }

    def enter(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, value in self.env().items():
            monkeypatch.setenv(name, value)


def build_course(site: Site) -> str:
    """Make a course in ``site`` as the project's own steps do; return its id."""
    from coursehub.catalog.db import make_engine, session_factory
    from coursehub.catalog.seed import seed_demo
    from coursehub.grading.assignments import (
        add_assignment,
        collect,
        generate_assignment,
        release_assignment,
    )
    from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
    from coursehub.grading.exchange import fetch_assignment, submit_assignment
    from coursehub.grading.gradebook import sync_gradebook
    from coursehub.grading.layout import ensure_course, layout_from_env

    engine = make_engine(site.database_url)
    with session_factory(engine)() as session:
        course = seed_demo(session)
        layout = layout_from_env(course.course_id)
        ensure_course(layout)
        add_assignment(layout, PS, [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
        generate_assignment(layout, PS)
        release_assignment(layout, PS)
        sync_gradebook(session, course, layout)
        session.commit()
    engine.dispose()
    for student in SCORES:
        home = site.root / "homes" / student
        fetch_assignment(layout.exchange_root, layout.course_id, PS, student, home)
        submit_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    collect(layout, PS)
    grade(layout)
    add_secrets_and_records(site, course.course_id)
    return course.course_id


def grade(layout: object) -> None:
    """Give each student of :data:`SCORES` a manual score on every graded cell (nbgrader API)."""
    from nbgrader.api import Gradebook

    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:  # type: ignore[attr-defined]
        for student, score in SCORES.items():
            with gradebook.db.no_autoflush:  # nbgrader builds the rows one by one (SAWarning)
                submission = gradebook.add_submission(PS, student)
            for notebook in submission.notebooks:
                for cell in notebook.grades:
                    cell.manual_score = score
        gradebook.db.commit()


def add_secrets_and_records(site: Site, course_id: str) -> None:
    """The hub's database and secret, a material credential, the LTI key, a usage record."""
    from jupyterhub import orm

    from coursehub.lti.keys import generate_key, tool_key_path
    from coursehub.material.credential import TOKEN, Credential, store_credential
    from coursehub.material.layout import MaterialLayout, material_root
    from coursehub.meter.journal import append_record
    from coursehub.meter.records import UsageRecord

    site.hub_dir.mkdir(mode=0o700)
    hub = orm.new_session_factory(f"sqlite:///{site.hub_dir / 'jupyterhub.sqlite'}")()
    hub.add_all([orm.User(name=name) for name in SCORES])
    hub.commit()
    hub.close()
    (site.hub_dir / "jupyterhub_cookie_secret").write_bytes(os.urandom(32).hex().encode())
    (site.hub_dir / "jupyterhub_cookie_secret").chmod(0o600)
    layout = MaterialLayout(material_root())
    store_credential(layout, course_id, Credential(TOKEN, "glpat-secret\n"), "https://git.example")
    generate_key(tool_key_path())
    record = UsageRecord("open", "job-1", "job", "p2500001", course_id, 1.7e9, 1.7e9)
    append_record(site.root / "usage", "hub", record)


def catalog_rows(url: str) -> dict[str, list[tuple]]:
    """Every row of every table of the catalog at ``url``, sorted."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                table: sorted(map(tuple, conn.execute(text(f'SELECT * FROM "{table}"'))), key=repr)
                for table in inspect(engine).get_table_names()
            }
    finally:
        engine.dispose()


def files_below(root: Path) -> dict[str, tuple]:
    """Each file and folder below ``root``: (type, mode, owner, SHA-256 of a file's content)."""
    found = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        if path.suffix in (".db", ".sqlite") or path.name.endswith(("-wal", "-shm")):
            continue  # databases are compared by their rows
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        found[str(path.relative_to(root))] = (
            stat.S_IFMT(st.st_mode),
            stat.S_IMODE(st.st_mode),
            st.st_uid,
            st.st_gid,
            digest,
        )
    return found


def grades_of(course_id: str) -> list[tuple]:
    from coursehub.grading.export import read_grade_table
    from coursehub.grading.layout import layout_from_env

    table = read_grade_table(layout_from_env(course_id))
    return [(row.student_id, row.total) for row in table.rows]


def hub_users(site: Site) -> list[str]:
    from jupyterhub import orm

    hub = orm.new_session_factory(f"sqlite:///{site.hub_dir / 'jupyterhub.sqlite'}")()
    try:
        return sorted(hub.scalars(select(orm.User.name)))
    finally:
        hub.close()


def fresh_database_url(request: pytest.FixtureRequest, backend: str, root: Path) -> str:
    """A catalog database with no table: a new SQLite file's URL, or a new PostgreSQL database."""
    if backend == "sqlite":
        return f"sqlite:///{root / 'data' / 'catalog.sqlite'}"
    server = request.getfixturevalue("postgres_server")
    name = f"test_{uuid.uuid4().hex[:16]}"
    server.create_database(name)
    request.addfinalizer(lambda: server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    return server.url(name)


@pytest.fixture
def site(tmp_path, database_url, database_backend, monkeypatch):
    """An installation with one course, graded submissions and every secret, entered."""
    url = database_url
    if database_backend == "sqlite":  # the catalog in the data folder, where it usually is
        (tmp_path / "site" / "data").mkdir(parents=True, mode=0o700)
        shutil.copyfile(url.removeprefix("sqlite:///"), tmp_path / "site/data/catalog.sqlite")
        url = f"sqlite:///{tmp_path / 'site/data/catalog.sqlite'}"
    made = Site(tmp_path / "site", url)
    made.enter(monkeypatch)
    build_course(made)
    return made


def snapshot(site: Site, course_id: str) -> dict[str, object]:
    parts = ("data", "courses", "exchange", "usage", "hub")
    return {
        "catalog": catalog_rows(site.database_url),
        "grades": grades_of(course_id),
        "hub users": hub_users(site),
        **{part: files_below(site.root / part) for part in parts},
    }


def test_a_course_restored_into_fresh_folders_is_the_same_course(
    site, tmp_path, request, database_backend, monkeypatch, capsys
):
    if os.geteuid() == 0:  # an owner that is not the restorer's comes back (as root)
        submitted = next((site.root / "courses").rglob("submitted/*/ps1/*.ipynb"))
        os.chown(submitted, 65534, 65534)
    course_id = "mlmeca-2025"
    before = snapshot(site, course_id)
    grades = dict(before["grades"])
    assert grades["p2500001"] > grades["p2500002"] > 0 and grades["p2500003"] is None
    assert sum(map(len, before["catalog"].values())) > 20
    assert [k for k in before["courses"] if k.startswith(f"{course_id}/submitted/p2500002/")]
    backups = tmp_path / "backups"
    backups.mkdir()
    assert main(["backup", str(backups), "--hub-dir", str(site.hub_dir)]) == 0
    printed = capsys.readouterr().out
    [archive] = backups.glob("coursehub-backup-*.tar.gz")
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert f"wrote {archive}" in printed, printed
    skipped = [line for line in printed.splitlines() if line.startswith("skipped")]
    assert [line.split(":")[0] for line in skipped] == ["skipped books"]  # no book built here

    shutil.rmtree(site.root)
    if database_backend == "postgresql":
        create_engine(site.database_url).dispose()
    fresh_root = tmp_path / "fresh"
    fresh = Site(fresh_root, fresh_database_url(request, database_backend, fresh_root))
    fresh.enter(monkeypatch)
    if database_backend == "sqlite":  # a command run before left a catalog file without tables
        empty = Path(fresh.database_url.removeprefix("sqlite:///"))
        empty.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(empty)) as db:
            db.execute("VACUUM")
    assert main(["restore", str(archive), "--hub-dir", str(fresh.hub_dir)]) == 0
    restored = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert len([line for line in restored if line.startswith("restored ")]) == 9

    after = snapshot(fresh, course_id)
    assert after == before
    secret = fresh_root / "data" / "lti" / "tool-key.pem"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE((fresh.hub_dir / "jupyterhub_cookie_secret").stat().st_mode) == 0o600
    assert not list(fresh_root.rglob(".*restoring-*")) and not list(
        fresh_root.rglob(".*replaced-*")
    )


def flip_one_byte(archive: Path, member_suffix: str) -> str:
    """Flip one byte in the content of the first member whose name ends with ``member_suffix``."""
    with tarfile.open(archive) as tar:
        info = next(m for m in tar if m.isfile() and m.name.endswith(member_suffix))
    with archive.open("r+b") as stream:
        stream.seek(info.offset_data + info.size // 2)
        byte = stream.read(1)
        stream.seek(-1, os.SEEK_CUR)
        stream.write(bytes([byte[0] ^ 0x01]))
    return info.name


@pytest.mark.parametrize("database_backend", ["sqlite"], indirect=True)
def test_a_damaged_archive_is_refused_naming_the_member_and_nothing_is_written(
    site, tmp_path, monkeypatch, capsys
):
    archive = tmp_path / "backup.tar"
    assert main(["backup", str(archive), "--hub-dir", str(site.hub_dir)]) == 0
    member = flip_one_byte(archive, "gradebook.db")
    fresh = Site(tmp_path / "fresh", f"sqlite:///{tmp_path / 'fresh/data/catalog.sqlite'}")
    fresh.enter(monkeypatch)
    capsys.readouterr()
    assert main(["restore", str(archive), "--hub-dir", str(fresh.hub_dir)]) == 2
    error = capsys.readouterr().err
    assert f"member {member} is damaged: SHA-256" in error, error
    assert not fresh.root.exists()
    assert main(["restore", "--check", str(archive)]) == 2
    assert member in capsys.readouterr().err


@pytest.mark.parametrize("database_backend", ["sqlite"], indirect=True)
def test_a_damaged_gzip_stream_and_a_foreign_archive_are_refused(site, tmp_path, monkeypatch):
    from coursehub.backup.restore import restore_backup
    from coursehub.backup.sources import find_sources
    from coursehub.backup.verify import verify_archive

    archive = tmp_path / "backup.tar.gz"
    assert main(["backup", str(archive), "--hub-dir", str(site.hub_dir)]) == 0
    whole = archive.read_bytes()
    variants = {}  # a byte changed anywhere, or the stream cut anywhere
    for at in (12, 100, 3000, len(whole) // 2, len(whole) - 30, len(whole) - 4):
        data = bytearray(whole)
        data[at] ^= 0xFF
        variants[f"flip-{at}"] = bytes(data)
    for at in (4000, len(whole) // 2, len(whole) - 8):
        variants[f"cut-{at}"] = whole[:at]
    for name, data in variants.items():
        bad = tmp_path / f"{name}.tar.gz"
        bad.write_bytes(data)
        with pytest.raises(CoursehubError, match=r"is damaged|is not a readable tar archive"):
            verify_archive(bad)
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(variants[f"flip-{len(whole) // 2}"])
    foreign = tmp_path / "foreign.tar.gz"
    with tarfile.open(foreign, "w:gz") as tar:
        tar.add(site.root / "data" / "lti", arcname="lti")
    fresh = Site(tmp_path / "fresh", f"sqlite:///{tmp_path / 'fresh/data/catalog.sqlite'}")
    fresh.enter(monkeypatch)
    sources = find_sources(hub_dir=fresh.hub_dir)
    with pytest.raises(CoursehubError, match=rf"{damaged}.* damaged"):
        restore_backup(damaged, sources)
    with pytest.raises(
        CoursehubError, match="is not a coursehub backup: its first member is 'lti'"
    ):
        restore_backup(foreign, sources)
    assert not fresh.root.exists()


def test_a_place_that_is_not_empty_is_replaced_only_with_force(site, tmp_path, capsys):
    archive = tmp_path / "backup.tar.gz"
    assert main(["backup", str(archive), "--hub-dir", str(site.hub_dir)]) == 0
    key = site.root / "data" / "lti" / "tool-key.pem"
    kept = key.read_bytes()
    rows = catalog_rows(site.database_url)
    inside = site.root / "courses" / "backup.tar.gz"
    assert main(["backup", str(inside), "--hub-dir", str(site.hub_dir)]) == 2
    assert "which it backs up: write it elsewhere" in capsys.readouterr().err
    engine = create_engine(site.database_url)
    with engine.begin() as conn:  # a change made after the backup
        conn.execute(text("UPDATE people SET last_name = 'Changed'"))
    engine.dispose()
    assert catalog_rows(site.database_url) != rows
    stray = site.root / "courses" / "stray.txt"
    stray.write_text("made after the backup")
    key.write_text("another key")
    capsys.readouterr()
    assert main(["restore", str(archive), "--hub-dir", str(site.hub_dir)]) == 2
    error = capsys.readouterr().err
    assert "not empty here: catalog" in error and "--force" in error
    assert key.read_text() == "another key" and stray.exists()
    assert main(["restore", "--force", str(archive), "--hub-dir", str(site.hub_dir)]) == 0
    assert key.read_bytes() == kept and not stray.exists()
    assert dict(grades_of("mlmeca-2025"))["p2500001"] > 0
    assert catalog_rows(site.database_url) == rows
    assert not list(site.root.rglob(".*replaced-*"))


@pytest.mark.parametrize("database_backend", ["sqlite"], indirect=True)
def test_the_doctor_warns_when_the_last_backup_is_old_gone_or_missing(site, tmp_path):
    from datetime import UTC, datetime, timedelta

    from coursehub.backup.record import read_record, record_path
    from coursehub.doctor.backupcheck import check_backup

    none = check_backup()
    assert none.level == "warn" and f"no backup was made on this host (no {record_path()})" in (
        none.line
    )
    archive = tmp_path / "backup.tar.gz"
    assert main(["backup", str(archive), "--hub-dir", str(site.hub_dir)]) == 0
    record = read_record()
    assert record is not None and record.archive == str(archive)
    assert stat.S_IMODE(record_path().stat().st_mode) == 0o600
    fresh = check_backup()
    assert fresh.level == "ok" and str(archive) in fresh.line, fresh.line
    late = check_backup(max_age_h=26, now=datetime.now(UTC) + timedelta(hours=30))
    assert late.level == "warn" and "h old, over 26 h: run `coursehub backup DEST`" in late.line
    archive.unlink()
    assert "is no longer there" in check_backup().line


@pytest.mark.parametrize("database_backend", ["sqlite"], indirect=True)
def test_a_restore_that_fails_half_way_puts_every_place_back(site, tmp_path, capsys):
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("needs root and chattr to make a folder that cannot be renamed")
    archive = tmp_path / "backup.tar.gz"
    assert main(["backup", str(archive), "--hub-dir", str(site.hub_dir)]) == 0
    key = site.root / "data" / "lti" / "tool-key.pem"
    key.write_text("a key made after the backup")
    before = {part: files_below(site.root / part) for part in ("data", "courses", "hub")}
    usage = site.root / "usage"  # the last part switched in: an immutable folder is not renamed
    subprocess.run(["chattr", "+i", str(usage)], check=True)
    try:
        capsys.readouterr()
        assert main(["restore", "--force", str(archive), "--hub-dir", str(site.hub_dir)]) == 2
    finally:
        subprocess.run(["chattr", "-i", str(usage)], check=True)
    assert "restore stopped, every place is as it was" in capsys.readouterr().err
    assert {part: files_below(site.root / part) for part in before} == before
    assert key.read_text() == "a key made after the backup"
    assert not [*site.root.rglob(".*restoring-*"), *site.root.rglob(".*replaced-*")]


@pytest.mark.parametrize("database_backend", ["sqlite"], indirect=True)
def test_the_record_of_a_backup_goes_beside_the_catalog_it_backed_up(
    database_url, tmp_path, monkeypatch, capsys
):
    from coursehub.backup.record import read_record
    from coursehub.doctor.backupcheck import check_backup

    monkeypatch.delenv("COURSEHUB_DATA_DIR", raising=False)
    monkeypatch.delenv("COURSEHUB_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    catalog = tmp_path / "catalog" / "catalog.sqlite"
    catalog.parent.mkdir()
    shutil.copyfile(database_url.removeprefix("sqlite:///"), catalog)
    url = f"sqlite:///{catalog}"
    archive = tmp_path / "backup.tar.gz"
    argv = ["backup", str(archive), "--database-url", url, "--hub-dir", str(tmp_path / "hub")]
    assert main(argv) == 0
    record = read_record(catalog.parent / "last-backup.json")
    assert record is not None and record.archive == str(archive)
    assert not (tmp_path / "xdg").exists()  # nothing in the default data directory
    assert record.parts == ("catalog",) and "hub/jupyterhub.sqlite" in record.skipped
    # the doctor reads it there, and says the backup holds almost nothing
    result = check_backup(database_url=url)
    assert result.level == "warn", result.line
    skipped = len(record.skipped)
    assert f"skipped {skipped} of {skipped + 1} parts: hub/jupyterhub.sqlite, hub/" in result.line


def test_a_backup_is_enough_with_its_catalog_hub_and_most_parts():
    from coursehub.doctor.backupcheck import skipped_warning

    parts = ("catalog", "hub/jupyterhub.sqlite", "hub/cookie-secret", "grading/courses")
    assert skipped_warning(parts, ("books", "lti/tool-key.pem")) == ""
    assert skipped_warning(parts[1:], ("catalog",)) == "skipped 1 of 4 parts: catalog"
    many = ("grading/exchange", "material", "books", "lti/tool-key.pem", "usage")
    assert skipped_warning(parts, many).startswith("skipped 5 of 9 parts: grading/exchange")
