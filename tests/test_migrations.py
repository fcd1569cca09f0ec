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
from coursehub.catalog.models.base import Base
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
    from coursehub.catalog.db import database_url
    from coursehub.settings import data_dir

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


def _set_revision(engine, revision):
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM alembic_version"))
        if revision is not None:
            connection.execute(text("INSERT INTO alembic_version VALUES (:v)"), {"v": revision})


def _upgrade_refusal(url, capsys):
    status = main(["db", "upgrade", "--database-url", url])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_db_upgrade_of_a_catalog_at_an_unknown_revision_refuses_in_one_line(
    blank_database_url, blank_engine, capsys
):
    schema.upgrade_database(blank_engine)
    _set_revision(blank_engine, "deadbeef0000")
    err = _upgrade_refusal(blank_database_url, capsys)
    assert "at revision deadbeef0000, unknown to this coursehub" in err
    assert "upgrade coursehub, or restore the database from a backup" in err


@pytest.mark.parametrize("drop", [False, True], ids=["emptied", "dropped"])
def test_db_upgrade_of_tables_without_a_revision_refuses_in_one_line_and_changes_nothing(
    blank_database_url, blank_engine, capsys, drop
):
    schema.upgrade_database(blank_engine)
    _set_revision(blank_engine, None)
    if drop:
        with blank_engine.begin() as connection:
            connection.execute(text("DROP TABLE alembic_version"))
    err = _upgrade_refusal(blank_database_url, capsys)
    assert "has tables but no schema revision" in err and "restore it from a backup" in err
    assert _diff(blank_engine) == []
    with pytest.raises(SchemaError, match="has tables but no schema revision"):
        schema.check_schema(blank_engine)


def test_db_upgrade_of_tables_newer_than_their_recorded_revision_refuses_in_one_line(
    blank_database_url, blank_engine, capsys
):
    schema.upgrade_database(blank_engine)
    _set_revision(blank_engine, "0001")
    err = _upgrade_refusal(blank_database_url, capsys)
    assert "from revision 0001 failed (" in err
    assert "its tables do not match the revision it records; restore it from a backup" in err


def test_an_upgrade_is_refused_only_for_tables_without_a_revision_or_an_unknown_one():
    known, head = {"0001", "0002"}, "0002"
    assert schema.plan_refusal("db", None, known, head, has_tables=False) is None
    assert schema.plan_refusal("db", "0001", known, head, has_tables=True) is None
    assert "no schema revision" in schema.plan_refusal("db", None, known, head, has_tables=True)
    assert "unknown to this" in schema.plan_refusal("db", "ffff", known, head, has_tables=True)


@pytest.mark.parametrize("command", ["upgrade", "current"])
def test_db_commands_on_an_unreachable_catalog_say_so_in_one_line_without_the_password(
    capsys, command
):
    url = "postgresql+psycopg://u:secret@127.0.0.1:1/catalog"  # nothing listens on port 1
    assert main(["db", command, "--database-url", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "coursehub: error: cannot open the catalog database postgresql+psycopg://u:***@127.0.0.1:1"
    )
    assert "secret" not in err and len(err.strip().splitlines()) == 1


def test_upgrade_to_the_team_profile_keeps_each_course_profile_for_its_team(blank_engine):
    config = schema.alembic_config(blank_engine)
    command.upgrade(config, "0009")
    with blank_engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO resource_profiles (id, name, cpu_limit, mem_limit, n_threads, gpus,"
                " jobs_per_gpu) VALUES (1, 'small', 1, 1073741824, 1, 0, 1)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO academic_years (id, label, start_year, is_active,"
                " is_current) VALUES (1, '2025-2026', 2025, true, true)"
            )
        )
        connection.execute(text("INSERT INTO portals (id, code, name) VALUES (1, 'MECA', 'M')"))
        connection.execute(
            text(
                "INSERT INTO courses (id, code, title, description, course_id, archived, year_pk,"
                " portal_pk, profile_pk, created_at, updated_at) VALUES (1, 'UE', 'T', '',"
                " 'ue-2025', false, 1, 1, 1, '2026-01-01', '2026-01-01')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO people (id, username, first_name, last_name, created_at, updated_at)"
                " VALUES (1, 'tdupont', '', '', '2026-01-01', '2026-01-01')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO memberships (id, person_pk, course_pk, role)"
                " VALUES (1, 1, 1, 'teacher')"
            )
        )
    command.upgrade(config, "head")
    with blank_engine.connect() as connection:
        row = connection.execute(text("SELECT profile_pk, team_profile_pk FROM courses")).one()
    assert tuple(row) == (1, None)
    with blank_engine.connect() as connection:  # the rebuilt table kept its memberships
        assert connection.execute(text("SELECT count(*) FROM memberships")).scalar_one() == 1
    command.downgrade(config, "0009")
    columns = {c["name"] for c in inspect(blank_engine).get_columns("courses")}
    assert "team_profile_pk" not in columns and "home_quota" not in columns
    with blank_engine.connect() as connection:
        assert connection.execute(text("SELECT profile_pk FROM courses")).scalar_one() == 1
        # the downgrade kept the memberships and the portals too
        assert connection.execute(text("SELECT count(*) FROM memberships")).scalar_one() == 1
        assert connection.execute(text("SELECT count(*) FROM portals")).scalar_one() == 1


def test_upgrade_to_the_budgets_keeps_the_memberships_and_gives_no_budget(blank_engine):
    config = schema.alembic_config(blank_engine)
    command.upgrade(config, "0011")
    with blank_engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO academic_years (id, label, start_year, is_active, is_current)"
                " VALUES (1, '2025-2026', 2025, true, true)"
            )
        )
        connection.execute(text("INSERT INTO portals (id, code, name) VALUES (1, 'MECA', 'M')"))
        connection.execute(
            text(
                "INSERT INTO courses (id, code, title, description, course_id, archived, year_pk,"
                " portal_pk, created_at, updated_at) VALUES (1, 'UE', 'T', '', 'ue-2025', false,"
                " 1, 1, '2026-01-01', '2026-01-01')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO people (id, username, first_name, last_name, created_at, updated_at)"
                " VALUES (1, 'p2501001', '', '', '2026-01-01', '2026-01-01')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO memberships (id, person_pk, course_pk, role)"
                " VALUES (1, 1, 1, 'student')"
            )
        )
    command.upgrade(config, "0012")
    with blank_engine.connect() as connection:
        row = connection.execute(text("SELECT budget_cpu_hours, budget_gpu_hours FROM courses"))
        assert tuple(row.one()) == (None, None)
        assert connection.execute(text("SELECT count(*) FROM memberships")).scalar_one() == 1
        assert connection.execute(text("SELECT count(*) FROM budget_overrides")).scalar_one() == 0
    command.downgrade(config, "0011")
    assert "budget_overrides" not in inspect(blank_engine).get_table_names()
    columns = {c["name"] for c in inspect(blank_engine).get_columns("courses")}
    assert not columns & {"budget_cpu_hours", "budget_gpu_hours"}
    with blank_engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM memberships")).scalar_one() == 1


def test_upgrade_to_the_exam_clock_settings_keeps_each_exam_and_sitting_as_it_was(blank_engine):
    config = schema.alembic_config(blank_engine)
    command.upgrade(config, "0016")
    rows = (
        "INSERT INTO academic_years (id, label, start_year, is_active, is_current)"
        " VALUES (1, '2025-2026', 2025, true, true)",
        "INSERT INTO portals (id, code, name) VALUES (1, 'MECA', 'M')",
        "INSERT INTO courses (id, code, title, description, course_id, archived, year_pk,"
        " portal_pk, created_at, updated_at) VALUES (1, 'UE', 'T', '', 'ue-2025', false,"
        " 1, 1, '2026-01-01', '2026-01-01')",
        "INSERT INTO people (id, username, first_name, last_name, created_at, updated_at)"
        " VALUES (1, 'p2501001', '', '', '2026-01-01', '2026-01-01')",
        "INSERT INTO exams (id, course_pk, assignment, opens_at, duration_min, hard_end,"
        " timezone, created_by, created_at) VALUES (1, 1, 'final', '2026-01-12 09:00:00',"
        " 60, '2026-01-12 12:00:00', 'UTC', 'mbuffat', '2026-01-01')",
        "INSERT INTO exam_sessions (id, exam_pk, person_pk, started_at, added_minutes, final)"
        " VALUES (1, 1, 1, '2026-01-12 09:05:00', 0, false)",
    )
    with blank_engine.begin() as connection:
        for row in rows:
            connection.execute(text(row))
    command.upgrade(config, "0017")
    with blank_engine.connect() as connection:
        exam = connection.execute(text("SELECT warn_before_min, fullscreen FROM exams"))
        assert tuple(exam.one()) == (5, "offered")  # the warning every exam had, a button
        assert connection.execute(text("SELECT count(*) FROM exam_sessions")).scalar_one() == 1
    command.downgrade(config, "0016")
    columns = {c["name"] for c in inspect(blank_engine).get_columns("exams")}
    assert not columns & {"warn_before_min", "fullscreen"}
    with blank_engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM exam_sessions")).scalar_one() == 1
