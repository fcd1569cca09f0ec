"""A student over the week's budget: no new server (spawn rule), no new runner job.

The course app runs for real on a local port (the test app, tokens
``tok-<part>``), the spawner is JupyterHub's own (``local_spawner``), the job
a real ``coursehub run``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from tornado import web
from werkzeug.serving import make_server

from coursehub.catalog.budgets import set_course_budget, set_override
from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.usage.rollup import apply_records
from coursehub.cli import main
from coursehub.contract import make_profile, profile_to_json
from coursehub.errors import UsageError
from coursehub.meter.budget import WeeklyBudget
from coursehub.meter.records import UsageRecord
from coursehub.runner.api import run
from coursehub.spawn.spawner import CourseProfiles
from coursehub.web.identity import Identity
from helpers import free_port, local_spawner

M2 = make_profile("m2", cpu_limit=2, mem_limit="4G", n_threads=2)


@pytest.fixture
def course_app(app, database_url):
    """The course app on a local port; mlmeca-2025 gives 1 CPU-hour a week, p2500001 used 1.5
    this week, p2500002 none, p2500003 used 1.5 but was raised to 2."""
    engine = make_engine(database_url)
    now = time.time()
    try:
        with session_scope(engine) as session:
            course = get_course(session, "mlmeca-2025")
            set_course_budget(course, WeeklyBudget(cpu_hours=1.0))
            set_override(session, course, "p2500003", WeeklyBudget(cpu_hours=2.0), "mbuffat")
            apply_records(
                session,
                [
                    UsageRecord(
                        "close", f"j{u}", "job", u, "mlmeca-2025", now, now - 60, cpu_s=5400.0
                    )
                    for u in ("p2500001", "p2500003")
                ],
            )
    finally:
        engine.dispose()
    # each student's server token: tok-<username> (the hub's own tokens in production)
    app.config["API_TOKEN_RESOLVER"] = lambda token: (
        Identity(token.removeprefix("tok-")) if token.startswith("tok-p25") else None
    )
    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/"
    server.shutdown()
    thread.join()


def spawner_of(name: str, token: str | None = None):
    group = ("nbgrader-mlmeca-2025", {"profile": profile_to_json(M2)})
    spawner = local_spawner([group], name=name)
    spawner.api_token = token or f"tok-{name}"
    spawner.log = logging.getLogger("test.spawner")
    return spawner


def start(profiles: CourseProfiles, spawner) -> None:
    pending = profiles.apply(spawner, {})
    assert pending is not None, "with a budget URL, apply returns the check to await"
    asyncio.run(pending)


def test_a_student_over_budget_is_refused_at_spawn_in_one_line(course_app, tmp_path):
    profiles = CourseProfiles(
        "local", gpu_ids=[], state_path=tmp_path / "g.json", budget_url=course_app
    )
    spawner = spawner_of("p2500001")
    with pytest.raises(web.HTTPError) as info:
        start(profiles, spawner)
    assert info.value.status_code == 403
    line = info.value.log_message or ""
    assert "\n" not in line
    assert "course mlmeca-2025: the weekly budget of 1 CPU-hours is used up (1.5 CPU-hours" in line
    assert "it resets on Mon " in line and "ask the course's team (mbuffat, tdupont)" in line
    assert "OMP_NUM_THREADS" not in spawner.environment  # nothing applied


def test_within_budget_or_raised_the_server_starts_and_its_jobs_are_checked(
    course_app, tmp_path, caplog
):
    profiles = CourseProfiles(
        "local", gpu_ids=[], state_path=tmp_path / "g.json", budget_url=course_app
    )
    for name in ("p2500002", "p2500003"):
        spawner = spawner_of(name)
        with caplog.at_level(logging.INFO, logger="test.spawner"):
            start(profiles, spawner)
        assert "budget not checked" not in caplog.text  # the app answered: within budget
        assert spawner.cpu_limit == 2.0
        assert spawner.environment["COURSEHUB_BUDGET_URL"] == course_app


def test_a_token_of_someone_else_is_not_answered(course_app, tmp_path, caplog):
    profiles = CourseProfiles(
        "local", gpu_ids=[], state_path=tmp_path / "g.json", budget_url=course_app
    )
    spawner = spawner_of("p2500001", "tok-p2500002")
    with caplog.at_level(logging.INFO, logger="test.spawner"):
        start(profiles, spawner)
    assert "budget not checked" in caplog.text and "HTTP 403" in caplog.text


def test_an_unreachable_course_app_starts_the_server(tmp_path, caplog):
    url = f"http://127.0.0.1:{free_port()}/"
    profiles = CourseProfiles("local", gpu_ids=[], state_path=tmp_path / "g.json", budget_url=url)
    spawner = spawner_of("p2500001")
    with caplog.at_level(logging.INFO, logger="test.spawner"):
        start(profiles, spawner)
    assert spawner.cpu_limit == 2.0
    assert "budget not checked" in caplog.text


def test_without_a_budget_url_apply_stays_synchronous(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSEHUB_BUDGET_URL", raising=False)
    profiles = CourseProfiles("local", gpu_ids=[], state_path=tmp_path / "g.json")
    assert profiles.apply(spawner_of("p2500001"), {}) is None


def server_env(monkeypatch, url: str, user: str, token: str) -> None:
    monkeypatch.setenv("COURSEHUB_BUDGET_URL", url)
    monkeypatch.setenv("COURSEHUB_COURSE_ID", "mlmeca-2025")
    monkeypatch.setenv("JUPYTERHUB_USER", user)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", token)
    monkeypatch.delenv("COURSEHUB_USAGE_DIR", raising=False)


def test_a_runner_job_over_budget_is_refused_before_it_starts(
    course_app, tmp_path, monkeypatch, capsys
):
    server_env(monkeypatch, course_app, "p2500001", "tok-p2500001")
    marker = tmp_path / "ran"
    script = tmp_path / "job.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    with pytest.raises(UsageError, match="weekly budget of 1 CPU-hours is used up"):
        run(str(script))
    assert main(["run", str(script)]) != 0
    err = capsys.readouterr().err
    assert "course mlmeca-2025: the weekly budget of 1 CPU-hours is used up" in err
    assert not marker.exists()


def test_a_runner_job_within_budget_runs(course_app, tmp_path, monkeypatch, caplog):
    server_env(monkeypatch, course_app, "p2500003", "tok-p2500003")
    marker = tmp_path / "ran"
    script = tmp_path / "job.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    with caplog.at_level(logging.WARNING, logger="coursehub.runner.budgetgate"):
        result = run(str(script), on_output=lambda _text: None)
    assert "budget not checked" not in caplog.text
    assert result.returncode == 0 and marker.exists()
