"""``coursehub year|portal|course``: round trips, idempotence, and bad input that writes nothing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.models.courses import AcademicYear, Course, Membership
from coursehub.cli import main


@pytest.fixture
def catalog(database_url, tmp_path, monkeypatch):
    """A migrated, seeded catalog (mlmeca-2025) with grading folders under tmp_path."""
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    assert main(["db", "seed", "--database-url", database_url]) == 0
    return database_url


def run(capsys, url: str, *argv: str) -> tuple[int, str, str]:
    status = main([*argv, "--database-url", url])
    out, err = capsys.readouterr()
    return status, out, err


def counts(url: str) -> tuple[int, int, int]:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            return (
                session.scalar(select(func.count()).select_from(AcademicYear)) or 0,
                session.scalar(select(func.count()).select_from(Course)) or 0,
                session.scalar(select(func.count()).select_from(Membership)) or 0,
            )
    finally:
        engine.dispose()


def test_a_year_is_created_once_made_current_and_listed_as_json(catalog, capsys):
    assert run(capsys, catalog, "year", "create", "2026-2027", "--current")[1] == (
        "academic year 2026-2027 created (current)\n"
    )
    assert "exists" in run(capsys, catalog, "year", "create", "2026-2027")[1]
    years = json.loads(run(capsys, catalog, "year", "list", "--json")[1])
    assert [(y["label"], y["state"], y["n_courses"]) for y in years] == [
        ("2026-2027", "current", 0),
        ("2025-2026", "open", 1),
    ]


def test_a_portal_gets_its_managers_is_renamed_and_listed(catalog, capsys):
    run(capsys, catalog, "portal", "create", "INFO", "--title", "Info", "--manager", "tdupont")
    assert run(capsys, catalog, "portal", "create", "INFO", "--manager", "tdupont")[0] == 0
    run(capsys, catalog, "portal", "rename", "INFO", "--title", "Informatique")
    run(capsys, catalog, "portal", "manager", "add", "INFO", "gmartin")
    run(capsys, catalog, "portal", "manager", "remove", "INFO", "tdupont")
    portals = json.loads(run(capsys, catalog, "portal", "list", "--json")[1])
    assert {"code": "INFO", "title": "Informatique", "managers": ["gmartin"]} in portals
    status, _, err = run(capsys, catalog, "portal", "manager", "remove", "INFO", "tdupont")
    assert status == 2 and "tdupont is not a manager of portal INFO" in err
    status, _, err = run(capsys, catalog, "portal", "manager", "add", "INFO", "jdoe")
    assert status != 0 and "portal manager 'jdoe' is not a known person" in err


def test_a_course_is_created_shown_listed_and_archived_idempotently(catalog, capsys):
    run(capsys, catalog, "year", "create", "2026-2027")
    argv = ("course", "create", "NUM1", "--title", "Numerics", "--year", "2026-2027")
    status, out, _ = run(capsys, catalog, *argv, "--portal", "MECA", "--lead", "mbuffat")
    assert (status, out) == (0, "num1-2026\n")
    assert run(capsys, catalog, *argv, "--portal", "MECA")[1] == "num1-2026\n"  # same again
    shown = json.loads(run(capsys, catalog, "course", "show", "num1-2026", "--json")[1])
    assert (shown["leads"], shown["portal"], shown["archived"]) == (["mbuffat"], "MECA", False)
    listed = json.loads(run(capsys, catalog, "course", "list", "--year", "2026-2027", "--json")[1])
    assert [c["course_id"] for c in listed] == ["num1-2026"]
    assert (
        run(capsys, catalog, "course", "archive", "num1-2026")[1] == "course num1-2026 archived\n"
    )
    assert run(capsys, catalog, "course", "list", "--year", "2026-2027", "--json")[1] == "[]\n"
    assert run(capsys, catalog, "course", "archive", "num1-2026", "--restore")[0] == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("year", "create", "2026-2028"), "must be YYYY-YYYY with the second year the first + 1"),
        (("year", "create", "26-27"), "must be YYYY-YYYY"),
        (
            (
                "course",
                "create",
                "MLMECA",
                "--title",
                "Again",
                "--year",
                "2025-2026",
                "--portal",
                "MECA",
            ),
            "course mlmeca-2025 already exists",
        ),
        (
            (
                "course",
                "create",
                "NEW",
                "--title",
                "T",
                "--year",
                "2025-2026",
                "--portal",
                "MECA",
                "--lead",
                "ghost",
            ),
            "lead 'ghost' is not a known person",
        ),
        (
            ("course", "create", "NEW", "--title", "T", "--year", "2031-2032", "--portal", "MECA"),
            "no academic year",
        ),
        (("course", "copy", "mlmeca-2025", "--to-year", "2025-2026"), "same academic year"),
        (("year", "rollover", "2025-2026", "--to", "2040-2041"), "no academic year '2040-2041'"),
    ],
)
def test_bad_input_is_one_clear_line_and_writes_nothing(catalog, capsys, argv, message):
    before = counts(catalog)
    status, _out, err = run(capsys, catalog, *argv)
    assert status == 2 and message in err and err.count("\n") == 1, err
    assert counts(catalog) == before


def test_copying_onto_a_year_that_has_the_course_and_rolling_an_archived_year_are_refused(
    catalog, capsys
):
    run(capsys, catalog, "year", "create", "2026-2027")
    assert run(capsys, catalog, "course", "copy", "mlmeca-2025", "--to-year", "2026-2027")[1] == (
        "mlmeca-2026\n"
    )
    before = counts(catalog)
    status, _, err = run(capsys, catalog, "course", "copy", "mlmeca-2025", "--to-year", "2026-2027")
    assert status == 2 and "already has course MLMECA (mlmeca-2026): nothing copied" in err
    run(capsys, catalog, "year", "archive", "2025-2026")
    status, _, err = run(capsys, catalog, "year", "rollover", "2025-2026", "--to", "2026-2027")
    assert status == 2 and "academic year 2025-2026 is archived" in err
    assert counts(catalog) == before


def test_a_rollover_dry_run_writes_nothing_and_a_second_rollover_skips_what_is_there(
    catalog, capsys
):
    run(capsys, catalog, "year", "create", "2026-2027")
    before = counts(catalog)
    out = run(capsys, catalog, "year", "rollover", "2025-2026", "--to", "2026-2027", "--dry-run")[1]
    assert "would copy: mlmeca-2025 -> mlmeca-2026" in out and "nothing written" in out
    assert counts(catalog) == before
    assert (
        "copied: mlmeca-2025"
        in run(capsys, catalog, "year", "rollover", "2025-2026", "--to", "2026-2027")[1]
    )
    again = run(capsys, catalog, "year", "rollover", "2025-2026", "--to", "2026-2027")[1]
    assert "already there: mlmeca-2025 -> mlmeca-2026" in again
