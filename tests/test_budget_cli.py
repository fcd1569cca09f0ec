"""``coursehub course budget``: the course's weekly budget, a student's override, bad input."""

from __future__ import annotations

import pytest

from coursehub.catalog.budgets import course_budget, list_overrides
from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.cli import main
from coursehub.meter.budget import WeeklyBudget


@pytest.fixture
def catalog(database_url):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    return database_url


def run(capsys, url: str, *argv: str) -> tuple[int, str, str]:
    status = main([*argv, "--database-url", url])
    out, err = capsys.readouterr()
    return status, out, err


def stored(url: str) -> tuple[WeeklyBudget, list[tuple[str, WeeklyBudget, str]]]:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            rows = [(r.username, r.budget, r.set_by) for r in list_overrides(session, course)]
            return course_budget(course), rows
    finally:
        engine.dispose()


def test_set_show_and_clear_the_course_budget(catalog, capsys):
    status, out, _ = run(
        capsys, catalog, "course", "budget", "mlmeca-2025", "--cpu-hours", "20", "--gpu-hours", "4"
    )
    assert status == 0
    assert out == "course mlmeca-2025: 20 CPU-hours, 4 GPU-hours a week per student\n"
    assert stored(catalog)[0] == WeeklyBudget(20.0, 4.0)
    run(capsys, catalog, "course", "budget", "mlmeca-2025", "--gpu-hours", "")
    assert stored(catalog)[0] == WeeklyBudget(20.0, None)
    status, out, _ = run(capsys, catalog, "course", "show", "mlmeca-2025", "--json")
    assert '"budget_cpu_hours": 20.0' in out and '"budget_gpu_hours": null' in out


def test_a_student_override_names_who_set_it(catalog, capsys):
    status, out, _ = run(
        capsys,
        catalog,
        *("course", "budget", "mlmeca-2025", "--student", "p2500001", "--cpu-hours", "40"),
        *("--by", "mbuffat"),
    )
    assert status == 0
    assert "  p2500001: 40 CPU-hours, no GPU limit a week (set by mbuffat, " in out
    assert stored(catalog)[1] == [("p2500001", WeeklyBudget(40.0, None), "mbuffat")]
    run(capsys, catalog, "course", "budget", "mlmeca-2025", "--student", "p2500001")
    assert stored(catalog)[1] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--cpu-hours", "-3"), "--cpu-hours: must be more than 0 hours, got '-3'"),
        (("--cpu-hours", "lots"), "--cpu-hours: expected a number of hours, got 'lots'"),
        (("--gpu-hours", "1e12"), "--gpu-hours: at most 43008 hours a week"),
        (("--student", "nobody", "--cpu-hours", "5"), "'nobody' is not a student of mlmeca-2025"),
    ],
)
def test_bad_input_is_one_line_and_saves_nothing(catalog, capsys, argv, message):
    status, _out, err = run(capsys, catalog, "course", "budget", "mlmeca-2025", *argv)
    assert status != 0
    assert message in err and len(err.strip().splitlines()) == 1
    assert stored(catalog) == (WeeklyBudget(), [])
