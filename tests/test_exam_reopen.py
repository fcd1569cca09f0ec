"""A proctor reopens a student's exam server after a crash: page, API, command line, refusals;
the bell stops the exam server of the work it submitted.

The hub is a real JupyterHub (``tests/hubfixture.py``): the student's server
is started, its process killed (the crash), then reopened through the
course app or ``coursehub exam reopen``; the hub runs a new server process
and the student's end has not moved. The seeded web catalog
(:func:`coursehub.web.testing.seed_web_catalog`): lead ``mbuffat``, teacher
``tdupont``, grader ``gmartin``, students ``p2500001``... of ``mlmeca-2025``.
"""

from __future__ import annotations

import html
import os
import signal
from datetime import UTC, datetime, timedelta

import pytest

from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.examevents import list_events
from coursehub.catalog.examproctor import REOPENED, check_reopen
from coursehub.catalog.exams import (
    Receipt,
    create_exam,
    get_exam,
    record_receipt,
    sitting_of,
    start_exam,
)
from coursehub.catalog.examtime import Window
from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.grading.bellstop import stop_exam_servers
from coursehub.grading.examreopen import NO_HUB, restart_exam_server
from coursehub.hub.hubclient import HubClient
from coursehub.web.testing import api_headers, dispose_app, make_test_app
from helpers import PageActions, free_port, wait_until
from test_exam_submit import released_exam, write_answer

COURSE, EXAM, STUDENT = "mlmeca-2025", "final", "p2500001"
PAGE = f"/courses/{COURSE}/exams/{EXAM}"
API = f"/api/v1/courses/{COURSE}/exams/{EXAM}/sittings"


def make_exam(url: str, started: tuple[str, ...] = (STUDENT,)) -> None:
    """Exam ``final``: 60 min, hard end in 2 h; ``started`` began 10 min ago."""
    now = datetime.now(UTC)
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, COURSE)
            window = Window(now - timedelta(hours=1), 60, now + timedelta(hours=2), "Europe/Paris")
            exam = create_exam(session, course, EXAM, window, "mbuffat")
            for name in started:
                start_exam(session, course, exam, name, now - timedelta(minutes=10))
    finally:
        engine.dispose()


def in_catalog(url: str, read):
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, COURSE)
            return read(session, course, get_exam(session, course, EXAM))
    finally:
        engine.dispose()


def ends_of(url: str, username: str) -> datetime:
    return in_catalog(url, lambda s, c, e: sitting_of(s, c, e, username).ends_at)


def reopen_events(url: str) -> list:
    return in_catalog(url, lambda s, c, e: [x for x in list_events(s, e) if x.kind == REOPENED])


@pytest.fixture
def hub_student(live_hub):
    """``p2500001`` on the hub (made if missing), its servers stopped, removed afterwards."""
    admin = HubClient(live_hub.api_url, live_hub.admin_token)
    made = admin.find_user(STUDENT) is None
    if made:
        admin.create_users([STUDENT])
    yield admin
    admin.stop_servers(STUDENT)
    wait_until(lambda: not admin.get_user(STUDENT).get("servers"), 60, 0.25, "the stop")
    if made:
        admin.delete_user(STUDENT)
    admin.close()


def server_pid(admin: HubClient) -> int | None:
    """The pid of the student's ready default server (None: none ready)."""
    server = (admin.get_user(STUDENT).get("servers") or {}).get("")
    if not server or not server.get("ready"):
        return None
    return int((server.get("state") or {})["pid"])


def crashed_server(admin: HubClient) -> int:
    """Start the student's server, wait for it, kill its process; return the dead pid."""
    assert admin.start_server(STUDENT) in (201, 202)
    pid = wait_until(lambda: server_pid(admin), 60, 0.25, f"{STUDENT}'s server")
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.integration
def test_a_teacher_reopens_a_crashed_exam_server_from_the_proctor_page(
    live_hub, hub_student, database_url, app
):
    make_exam(database_url, started=(STUDENT,))
    hubbed = make_test_app(
        database_url, HUB_SYNC_URL=live_hub.api_url, HUB_SYNC_TOKEN=live_hub.admin_token
    )
    try:
        pages = PageActions(hubbed.test_client())
        page = html.unescape(pages.text(PAGE, "lead"))
        assert page.count("Reopen server") == 2  # p2500001's button and the help line
        before = ends_of(database_url, STUDENT)
        dead = crashed_server(hub_student)
        answer = pages.post_form(PAGE + "/reopen", "teacher", {"username": STUDENT}, form_page=PAGE)
        assert answer.status_code == 302
        shown = html.unescape(pages.text(PAGE, "teacher"))
        assert f"{STUDENT}'s exam server reopened by tdupont: server start" in shown
        pid = wait_until(lambda: server_pid(hub_student), 60, 0.25, "the reopened server")
        assert pid != dead
        assert ends_of(database_url, STUDENT) == before
        (event,) = reopen_events(database_url)
        assert event.username == STUDENT and event.detail.startswith("by tdupont: server start")
        token = pages.csrf(PAGE, "teacher")
        data = {"csrf_token": token, "username": STUDENT}
        graded = pages.client.post(PAGE + "/reopen", data=data, headers=pages.headers("grader"))
        assert graded.status_code == 403
    finally:
        dispose_app(hubbed)


def test_the_page_refuses_a_student_who_has_not_started_and_records_nothing(pages, app):
    make_exam(app.config["DATABASE_URL"])
    page = html.unescape(pages.text(PAGE, "teacher"))
    answer = pages.post_form(PAGE + "/reopen", "teacher", {"username": "p2500002"}, form_page=PAGE)
    assert answer.status_code == 302
    shown = html.unescape(pages.text(PAGE, "teacher"))
    assert "p2500002 has not started final: nothing to reopen" in shown
    assert "Reopen server" in page and reopen_events(app.config["DATABASE_URL"]) == []


def test_the_api_reopens_without_a_hub_and_names_every_refusal(client, app):
    url = app.config["DATABASE_URL"]
    make_exam(url, started=(STUDENT, "p2500003"))
    before = ends_of(url, STUDENT)
    answer = client.post(f"{API}/{STUDENT}/reopen", headers=api_headers("teacher"))
    assert answer.status_code == 200, answer.get_json()
    reopened = answer.get_json()
    assert reopened["reopened_by"] == "tdupont" and reopened["hub"] == NO_HUB
    assert datetime.fromisoformat(reopened["ends_at"]) == before == ends_of(url, STUDENT)
    (event,) = reopen_events(url)
    assert event.detail == f"by tdupont: {NO_HUB}"
    assert client.post(f"{API}/{STUDENT}/reopen", headers=api_headers("student")).status_code == 403
    refusals = {
        "p2500002": "p2500002 has not started final: nothing to reopen",
        "p9": "not a student",
    }
    for name, words in refusals.items():
        refused = client.post(f"{API}/{name}/reopen", headers=api_headers("teacher"))
        assert refused.status_code == 400 and words in refused.get_json()["fields"]["username"]
    ended = client.post(f"{API}/p2500003/end", headers=api_headers("teacher"))
    assert ended.status_code == 200
    refused = client.post(f"{API}/p2500003/reopen", headers=api_headers("teacher"))
    assert refused.status_code == 400
    assert "is over (ended " in refused.get_json()["fields"]["username"]
    assert "by tdupont): nothing to reopen" in refused.get_json()["fields"]["username"]
    unknown = f"/api/v1/courses/{COURSE}/exams/midterm/sittings/{STUDENT}/reopen"
    missing = client.post(unknown, headers=api_headers("teacher"))
    assert missing.status_code == 404 and "midterm" in missing.get_json()["error"]
    assert len(reopen_events(url)) == 1


def test_the_api_says_when_the_hub_does_not_answer_and_records_nothing(app, database_url):
    make_exam(database_url)
    closed = f"http://127.0.0.1:{free_port()}/hub/api"
    hubbed = make_test_app(
        database_url, HUB_SYNC_URL=closed, HUB_SYNC_TOKEN="t", HUB_SYNC_ATTEMPTS=1
    )
    try:
        answer = hubbed.test_client().post(
            f"{API}/{STUDENT}/reopen", headers=api_headers("teacher")
        )
        assert answer.status_code == 502
        assert answer.get_json()["error"].startswith("the hub did not reopen the server: ")
        assert reopen_events(database_url) == []
    finally:
        dispose_app(hubbed)


def test_a_student_submitted_at_the_bell_is_not_reopened(database_url, app):
    make_exam(database_url)

    def bell_then_check(session, course, exam):
        receipt = Receipt(datetime.now(UTC), f"{STUDENT}+final+x", "ab" * 32, {})
        record_receipt(session, course, exam, STUDENT, receipt, final=True)
        with pytest.raises(UsageError, match="submitted at the bell: nothing to reopen"):
            check_reopen(session, course, exam, STUDENT, datetime.now(UTC))

    in_catalog(database_url, bell_then_check)


@pytest.mark.integration
def test_restarting_names_a_student_the_hub_does_not_know(live_hub):
    admin = HubClient(live_hub.api_url, live_hub.admin_token)
    with admin, pytest.raises(UsageError, match="username: the hub has no user nobody-x1"):
        restart_exam_server(admin, "nobody-x1")


# --- coursehub exam reopen --------------------------------------------------------------------


def run(capsys, url: str, *argv: str) -> tuple[int, str, str]:
    status = main(["exam", *argv, "--database-url", url])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def cli_catalog(database_url, monkeypatch):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    monkeypatch.setenv("COURSEHUB_GRADING_TIMEZONE", "Europe/Paris")
    make_exam(database_url, started=(STUDENT, "p2500003"))
    return database_url


@pytest.mark.integration
def test_the_command_reopens_a_crashed_server_and_names_each_refusal(
    cli_catalog, live_hub, hub_student, capsys, monkeypatch
):
    url = cli_catalog
    monkeypatch.setenv("COURSEHUB_HUB_API_URL", live_hub.api_url)
    monkeypatch.setenv("COURSEHUB_HUB_API_TOKEN", live_hub.admin_token)
    before = ends_of(url, STUDENT)
    dead = crashed_server(hub_student)
    status, out, err = run(capsys, url, "reopen", COURSE, EXAM, "--student", STUDENT,
                           "--by", "mbuffat")  # fmt: skip
    assert status == 0, err
    assert f"{STUDENT}'s exam server for final reopened by mbuffat: server start" in out
    assert "as before" in out
    assert wait_until(lambda: server_pid(hub_student), 60, 0.25, "the reopened server") != dead
    assert ends_of(url, STUDENT) == before
    (event,) = reopen_events(url)
    assert event.detail.startswith("by mbuffat: server start")
    refusals = [
        (("--student", "p2500002"), "--student: p2500002 has not started final: nothing to reopen"),
        (("--student", "p9"), "--student: "),
        (("--student", "p2500003"), "--student: the hub has no user p2500003"),
        (("--student", STUDENT, "--by", "p2500002"), "--by: "),
    ]
    for options, words in refusals:
        status, _, err = run(capsys, url, "reopen", COURSE, EXAM, *options)
        assert status == 2 and words in err and len(err.strip().splitlines()) == 1, err
    status, _, err = run(capsys, url, "reopen", COURSE, "midterm", "--student", STUDENT)
    assert status != 0 and "has no exam 'midterm'" in err and len(err.strip().splitlines()) == 1
    assert run(capsys, url, "end", COURSE, EXAM, "--student", STUDENT)[0] == 0
    status, _, err = run(capsys, url, "reopen", COURSE, EXAM, "--student", STUDENT)
    assert status == 2 and f"--student: {STUDENT}'s time on final is over (ended " in err
    monkeypatch.setenv("COURSEHUB_HUB_API_URL", f"http://127.0.0.1:{free_port()}/hub/api")
    status, _, err = run(capsys, url, "reopen", COURSE, EXAM, "--student", "p2500003")
    assert status == 1 and "the hub did not reopen p2500003's server" in err
    assert len(reopen_events(url)) == 1


@pytest.mark.integration
def test_the_bell_submits_a_students_work_then_the_hub_stops_their_exam_server(
    cli_catalog, live_hub, hub_student, capsys, monkeypatch, tmp_path
):
    layout = released_exam(tmp_path)
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    homes = tmp_path / "homes"
    write_answer(layout, STUDENT, homes / STUDENT, "at the bell")
    assert hub_student.start_server(STUDENT) in (201, 202)
    wait_until(lambda: server_pid(hub_student), 60, 0.25, f"{STUDENT}'s server")
    assert run(capsys, cli_catalog, "end", COURSE, EXAM, "--student", STUDENT)[0] == 0
    pattern = str(homes / "{student}")
    # without a hub: submitted all the same, the servers left, one line says why
    monkeypatch.delenv("COURSEHUB_HUB_API_URL", raising=False)
    monkeypatch.delenv("JUPYTERHUB_API_URL", raising=False)
    assert run(capsys, cli_catalog, "end", COURSE, EXAM, "--student", "p2500003")[0] == 0
    write_answer(layout, "p2500003", homes / "p2500003", "at the bell too")
    monkeypatch.setenv("COURSEHUB_HUB_API_URL", live_hub.api_url)
    monkeypatch.setenv("COURSEHUB_HUB_API_TOKEN", live_hub.admin_token)
    status, out, _ = run(capsys, cli_catalog, "bell", COURSE, EXAM, "--work-dir", pattern)
    assert status == 0 and f"{STUDENT}: submitted" in out, out
    assert "2 submitted, 0 failed" in out
    assert f"{STUDENT}: exam server stopped (default)" in out, out
    assert "p2500003: exam server" not in out  # no server on the hub: nothing to stop
    wait_until(lambda: not hub_student.get_user(STUDENT).get("servers"), 60, 0.25, "the stop")


def test_the_bell_without_a_hub_submits_and_says_the_servers_were_not_stopped():
    said = stop_exam_servers(["p2500001"], environ={})
    assert said == ["exam servers not stopped: no hub URL: pass --hub-url or set "
                    "COURSEHUB_HUB_API_URL"]  # fmt: skip
    assert stop_exam_servers([], environ={}) == []
    hub = f"http://127.0.0.1:{free_port()}/hub/api"  # nothing listens there
    (line,) = stop_exam_servers(["p2500001"], hub, environ={"COURSEHUB_HUB_API_TOKEN": "t"})
    assert line.startswith("p2500001: exam server not stopped: "), line
