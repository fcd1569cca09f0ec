"""Alembic migrations: they build the models' schema exactly, and check_schema guards the app."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from coursehub.catalog import schema
from coursehub.catalog.db import make_engine
from coursehub.catalog.errors import SchemaError
from coursehub.catalog.models import Base
from coursehub.cli import main


@pytest.fixture
def blank_engine(blank_database_url):
    engine = make_engine(blank_database_url)
    yield engine
    engine.dispose()


def _diff(engine):
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return compare_metadata(context, Base.metadata)


def test_migration_head_matches_the_models(blank_engine):
    schema.upgrade_database(blank_engine)
    assert _diff(blank_engine) == []
    assert schema.current_revision(blank_engine) == schema.head_revision()


def test_compare_detects_a_missing_table(blank_engine):
    schema.upgrade_database(blank_engine)
    with blank_engine.begin() as connection:
        connection.execute(text("DROP TABLE course_materials"))
    assert [d[0] for d in _diff(blank_engine)] == ["add_table"]


def test_downgrade_to_base_then_upgrade_again(blank_engine):
    schema.upgrade_database(blank_engine)
    command.downgrade(schema.alembic_config(blank_engine), "base")
    assert set(inspect(blank_engine).get_table_names()) <= {"alembic_version"}
    schema.upgrade_database(blank_engine)
    assert _diff(blank_engine) == []


def test_constraint_names_follow_the_convention(blank_engine):
    schema.upgrade_database(blank_engine)
    inspector = inspect(blank_engine)
    uniques = {u["name"] for u in inspector.get_unique_constraints("memberships")}
    foreign = {f["name"] for f in inspector.get_foreign_keys("memberships")}
    assert "uq_memberships_person_pk_course_pk" in uniques
    assert "fk_memberships_course_pk_courses" in foreign


def test_check_schema_on_empty_database_names_the_command(blank_engine):
    with pytest.raises(SchemaError, match=r"is empty: run `coursehub db upgrade`"):
        schema.check_schema(blank_engine)
    schema.upgrade_database(blank_engine)
    schema.check_schema(blank_engine)


def test_check_schema_on_older_database(blank_engine, monkeypatch):
    schema.upgrade_database(blank_engine)
    monkeypatch.setattr(schema, "head_revision", lambda: "9999")
    with pytest.raises(SchemaError, match=r"older than 9999: run `coursehub db upgrade`"):
        schema.check_schema(blank_engine)


def test_check_schema_on_unknown_revision(blank_engine):
    schema.upgrade_database(blank_engine)
    with blank_engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'fffffff'"))
    with pytest.raises(SchemaError, match="unknown to this coursehub"):
        schema.check_schema(blank_engine)


def test_db_commands(blank_database_url, capsys):
    assert main(["db", "current", "--database-url", blank_database_url]) == 1
    assert "(empty): needs `coursehub db upgrade`" in capsys.readouterr().out
    assert main(["db", "upgrade", "--database-url", blank_database_url]) == 0
    assert main(["db", "current", "--database-url", blank_database_url]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["db", "seed", "--database-url", blank_database_url]) == 0
    assert "seeded course mlmeca-2025" in capsys.readouterr().out


def test_seed_refuses_an_empty_database(blank_database_url, capsys):
    assert main(["db", "seed", "--database-url", blank_database_url]) == 2
    assert "run `coursehub db upgrade`" in capsys.readouterr().err


def test_default_database_is_sqlite_in_the_data_dir(tmp_path, monkeypatch):
    from coursehub.catalog.db import data_dir, database_url

    env = {"COURSEHUB_DATA_DIR": str(tmp_path / "d")}
    assert database_url(env) == f"sqlite:///{tmp_path / 'd' / 'catalog.sqlite'}"
    assert database_url({**env, "COURSEHUB_DATABASE_URL": "postgresql://x/y"}) == "postgresql://x/y"
    assert data_dir({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "coursehub"
    monkeypatch.delenv("COURSEHUB_DATABASE_URL", raising=False)
    monkeypatch.setenv("COURSEHUB_DATA_DIR", str(tmp_path / "env"))
    assert main(["db", "upgrade"]) == 0
    assert (tmp_path / "env" / "catalog.sqlite").is_file()


def test_sqlite_engine_enforces_foreign_keys_and_wal(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'c.sqlite'}")
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    engine.dispose()
