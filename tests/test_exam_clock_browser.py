"""Chromium on an exam server's JupyterLab: the exam clock counts down, warns, says time is up,
and the browser's full-screen and focus events reach the course's team.

The course app is a fresh test app and catalog served over HTTP on a local
port (werkzeug, :func:`coursehub.web.testing.live_server`); the server is a
real ``jupyter lab`` subprocess with the exam clock's options of an exam
server (:func:`coursehub.examroom.server.plan_exam_args`: the server
extension :mod:`coursehub.examroom.clock` and the shipped JupyterLab
extension) and the variables the spawn gives it (``COURSEHUB_EXAM``,
``COURSEHUB_EXAM_URL``), the student's API token as its
``JUPYTERHUB_API_TOKEN``. Not the whole exam spawn (a hub, the student's
account, exam kernels): those are tested in ``test_exam_workspace.py`` and
``test_exam_server.py``; here the kernel is a plain one.

The end is moved as a proctor moves it (``ended_at`` in the catalog), and
the clock follows at its next poll (every 15 s, answers cached 5 s).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from sqlalchemy import update

from appbrowser import BROWSER_MARKS
from coursehub.catalog.courses import get_course
from coursehub.catalog.db import session_scope
from coursehub.catalog.exams import Receipt, get_exam, record_receipt
from coursehub.catalog.models.exams import ExamSession
from coursehub.examroom.server import ExamSeat, plan_exam_args
from coursehub.web.testing import api_headers, live_server
from helpers import free_port

COURSE, EXAM, STUDENT = "mlmeca-2025", "final", "p2500001"
EXAMS = f"/api/v1/courses/{COURSE}/exams"
TOKEN = "clock-test-token"
CLOCK = "#coursehub-exam-clock"
#: What the clock's polls may take to show a moved end: the poll, the cache, a margin.
FOLLOW_MS = 40_000

pytestmark = [*BROWSER_MARKS, pytest.mark.slow]


def clock_args(home: Path) -> list[str]:
    """The exam server's options that load the clock (not the exam kernels)."""
    return [a for a in plan_exam_args(ExamSeat(COURSE, EXAM, home)) if "Kernel" not in a]


def notebook() -> dict:
    cell = {
        "cell_type": "code",
        "metadata": {},
        "source": "",
        "outputs": [],
        "execution_count": None,
    }
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return {"cells": [cell], "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}


def start_lab(tmp_path: Path, course_app: str) -> tuple[subprocess.Popen, int, Path]:
    home = tmp_path / "home"
    (home / COURSE / EXAM).mkdir(parents=True)
    (home / COURSE / EXAM / "final.ipynb").write_text(json.dumps(notebook()))
    port = free_port()
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-user"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-ws"),
        "COURSEHUB_EXAM": f"{COURSE}/{EXAM}",
        "COURSEHUB_EXAM_URL": course_app,
        "JUPYTERHUB_USER": STUDENT,
        "JUPYTERHUB_API_TOKEN": api_headers("student")["Authorization"].removeprefix("token "),
    }
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}"]
    command += ["--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}"]
    command += [f"--ServerApp.root_dir={home}", *clock_args(home)]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    with (tmp_path / "lab.log").open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert server.poll() is None, (tmp_path / "lab.log").read_text()[-3000:]
        try:
            if requests.get(f"http://127.0.0.1:{port}/api/status", timeout=5).status_code < 500:
                return server, port, home
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    raise AssertionError("jupyter lab did not answer: " + (tmp_path / "lab.log").read_text())


def status_of(port: int) -> dict:
    answer = requests.get(
        f"http://127.0.0.1:{port}/coursehub/exam/status",
        headers={"Authorization": f"token {TOKEN}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def end_at(database_url: str, moment: datetime) -> None:
    """End the student's time at ``moment``, as a proctor does."""
    from coursehub.catalog.db import make_engine

    engine = make_engine(database_url)
    with session_scope(engine) as session:
        session.execute(update(ExamSession).values(ended_at=moment, ended_by="mbuffat"))
    engine.dispose()


def submit_final(database_url: str) -> None:
    """Keep a final receipt, as the bell does."""
    from coursehub.catalog.db import make_engine

    engine = make_engine(database_url)
    with session_scope(engine) as session:
        course = get_course(session, COURSE)
        exam = get_exam(session, course, EXAM)
        receipt = Receipt(datetime.now(UTC), "p2500001+final+x", "ab" * 32, {"f": "cd" * 32})
        record_receipt(session, course, exam, STUDENT, receipt, final=True)
    engine.dispose()


def open_lab(browser, port: int):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    path = f"{COURSE}/{EXAM}/final.ipynb"
    page.goto(f"http://127.0.0.1:{port}/lab/tree/{path}?token={TOKEN}", timeout=120_000)
    page.locator(CLOCK).wait_for(timeout=120_000)
    return context, page


def create_and_start(client, **settings) -> None:
    """Create the exam (open 5 minutes ago, 60 minutes, with ``settings``); the student starts."""
    now = datetime.now(UTC)
    body = {
        "assignment": EXAM,
        "opens_at": (now - timedelta(minutes=5)).isoformat(timespec="seconds"),
        "duration_min": 60,
        "hard_end": (now + timedelta(hours=2)).isoformat(timespec="seconds"),
        **settings,
    }
    assert client.post(EXAMS, json=body, headers=api_headers("lead")).status_code == 201
    assert client.post(f"{EXAMS}/{EXAM}/start", headers=api_headers("student")).status_code == 200


@pytest.mark.parametrize("database_backend", ["sqlite"])
def test_the_exam_clock_counts_down_warns_and_says_time_is_up(
    app, client, database_url, browser, tmp_path
):
    create_and_start(client)
    with live_server(app) as course_app:
        run_the_exam(client, database_url, browser, tmp_path, course_app)


def run_the_exam(client, database_url, browser, tmp_path, course_app):
    server, port, home = start_lab(tmp_path, course_app)
    running = re.compile(rf"^{EXAM}: 5\d:\d\d left")
    try:
        first = status_of(port)
        assert 59 * 60 - 30 < first["seconds_left"] <= 60 * 60
        context, page = open_lab(browser, port)
        clock = page.locator(CLOCK)
        assert running.match(clock.inner_text(timeout=30_000)), clock.inner_text()
        # the student writes and saves
        editor = page.locator(".jp-Notebook .jp-Cell .cm-content").first
        editor.click()
        editor.type("answer = 42")
        page.keyboard.press("Control+s")
        saved = home / COURSE / EXAM / "final.ipynb"
        deadline = time.monotonic() + 30
        while "answer = 42" not in saved.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "answer = 42" in saved.read_text()
        # full screen, left; the tab hidden; the window's focus lost
        page.locator(".coursehub-ExamClock-fullscreen").click()
        page.wait_for_function("document.fullscreenElement !== null", timeout=10_000)
        page.evaluate("document.exitFullscreen()")
        page.wait_for_function("document.fullscreenElement === null", timeout=10_000)
        page.evaluate(
            "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        kinds: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events = client.get(f"{EXAMS}/{EXAM}/events", headers=api_headers("lead")).get_json()
            kinds = [e["kind"] for e in events["events"] if e["username"] == STUDENT]
            if {"fullscreen-enter", "fullscreen-exit", "tab-hidden"} <= set(kinds):
                break
            time.sleep(0.5)
        assert {"fullscreen-enter", "fullscreen-exit", "tab-hidden"} <= set(kinds), kinds
        context.close()  # the browser closed

        # another browser: the same end, the work there
        context, page = open_lab(browser, port)
        assert status_of(port)["ends_at"] == first["ends_at"]
        assert running.match(page.locator(CLOCK).inner_text(timeout=30_000))
        page.locator(".jp-Cell", has_text="answer = 42").wait_for(timeout=60_000)

        # a proctor moves the end to 4 minutes from now: the clock follows and warns
        end_at(database_url, datetime.now(UTC) + timedelta(minutes=4))
        page.locator(".Toastify__toast", has_text="left in final").wait_for(timeout=FOLLOW_MS)
        assert page.locator(CLOCK).inner_text().startswith(f"{EXAM}: 3:")
        # ... then ends it: time is up, being submitted, then submitted with its receipt
        end_at(database_url, datetime.now(UTC) - timedelta(seconds=1))
        up = page.locator(CLOCK, has_text="Time is up: your work is being submitted")
        up.wait_for(timeout=FOLLOW_MS)
        assert page.locator(".coursehub-ExamClock-fullscreen").is_hidden()
        submit_final(database_url)
        done = page.locator(CLOCK, has_text="Time is up: your work was submitted at")
        done.wait_for(timeout=FOLLOW_MS)
        assert "SHA-256 abababababab" in done.inner_text()
        # after the end, the browser's events are not taken
        before = len(
            client.get(f"{EXAMS}/{EXAM}/events", headers=api_headers("lead")).json["events"]
        )
        page.evaluate("window.dispatchEvent(new Event('blur'))")
        time.sleep(2)
        after = client.get(f"{EXAMS}/{EXAM}/events", headers=api_headers("lead")).json["events"]
        assert len(after) == before
        context.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


OVERLAY = "#coursehub-exam-fullscreen-overlay"


@pytest.mark.parametrize("database_backend", ["sqlite"])
def test_full_screen_required_covers_the_workspace_and_the_exams_warning_time_is_kept(
    app, client, database_url, browser, tmp_path
):
    create_and_start(client, warn_before_min=20, fullscreen="required")
    with live_server(app) as course_app:
        server, port, _ = start_lab(tmp_path, course_app)
        try:
            status = status_of(port)
            assert (status["warn_before_s"], status["fullscreen"]) == (20 * 60, "required")
            sit_in_full_screen(client, database_url, browser, port)
        finally:
            server.terminate()
            server.wait(timeout=30)


def sit_in_full_screen(client, database_url, browser, port):
    context, page = open_lab(browser, port)
    overlay = page.locator(OVERLAY)
    # not in full screen: the workspace is covered and inert until the student enters it
    overlay.wait_for(timeout=30_000)
    assert "must be taken in full screen" in overlay.inner_text()
    assert page.evaluate("document.getElementById('main').inert") is True
    overlay.get_by_role("button", name="Enter full screen").click()
    page.wait_for_function("document.fullscreenElement !== null", timeout=10_000)
    overlay.wait_for(state="detached", timeout=10_000)
    assert page.evaluate("document.getElementById('main').inert") is False
    # leaving full screen brings the overlay back, and is recorded
    page.evaluate("document.exitFullscreen()")
    page.wait_for_function("document.fullscreenElement === null", timeout=10_000)
    overlay.wait_for(timeout=10_000)
    kinds: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "fullscreen-exit" not in kinds:
        events = client.get(f"{EXAMS}/{EXAM}/events", headers=api_headers("lead")).get_json()
        kinds = [e["kind"] for e in events["events"] if e["username"] == STUDENT]
        time.sleep(0.5)
    assert {"fullscreen-enter", "fullscreen-exit"} <= set(kinds), kinds
    overlay.get_by_role("button", name="Enter full screen").click()
    overlay.wait_for(state="detached", timeout=10_000)

    # the exam's warning time, 20 minutes: none with 25 minutes left, one below 20
    clock = page.locator(CLOCK)
    end_at(database_url, datetime.now(UTC) + timedelta(minutes=25))
    page.locator(CLOCK, has_text=f"{EXAM}: 24:").wait_for(timeout=FOLLOW_MS)
    assert "coursehub-mod-warning" not in (clock.get_attribute("class") or "")
    assert page.locator(".Toastify__toast", has_text="left in final").count() == 0
    end_at(database_url, datetime.now(UTC) + timedelta(minutes=19))
    page.locator(".Toastify__toast", has_text="left in final").wait_for(timeout=FOLLOW_MS)
    assert clock.inner_text().startswith(f"{EXAM}: 18:")
    assert "coursehub-mod-warning" in (clock.get_attribute("class") or "")
    context.close()
