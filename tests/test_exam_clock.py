"""The exam clock's server side: where it asks, what it answers, and nothing outside an exam.

Pure functions of :mod:`coursehub.examroom.clock` from tables; the server
extension in a real ``jupyter server`` with and without an exam; the built
JupyterLab extension shipped where the exam server's options look for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from coursehub.examroom.clock import (
    CACHE_S,
    ClockConfig,
    config_from_env,
    plan_status,
    save_refusal,
)
from coursehub.examroom.server import LABEXTENSIONS, ExamSeat, plan_exam_args, plan_exam_traits
from helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "clock-unit-token"
ENV = {
    "COURSEHUB_EXAM_URL": "http://127.0.0.1:8200/",
    "COURSEHUB_EXAM": "mlmeca-2025/final",
    "JUPYTERHUB_USER": "p2500001",
    "JUPYTERHUB_API_TOKEN": "server-token",
}


def test_an_exam_servers_environment_names_the_exam_its_student_and_the_course_app():
    config = config_from_env(ENV)
    assert config == ClockConfig(
        "http://127.0.0.1:8200", "server-token", "mlmeca-2025", "final", "p2500001"
    )
    assert "server-token" not in repr(config)
    assert config.sitting_url() == (
        "http://127.0.0.1:8200/api/v1/courses/mlmeca-2025/exams/final/sittings/p2500001"
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"COURSEHUB_EXAM_URL": ""},
        {"COURSEHUB_EXAM": ""},
        {"COURSEHUB_EXAM": "final"},
        {"COURSEHUB_EXAM": "mlmeca-2025/final/../x"},
        {"JUPYTERHUB_USER": ""},
        {"JUPYTERHUB_API_TOKEN": ""},
    ],
)
def test_a_server_without_the_whole_environment_is_no_exam_server(changes):
    assert config_from_env(ENV | changes) is None


def test_the_status_counts_down_from_the_course_apps_answer():
    config = config_from_env(ENV)
    assert config is not None
    sitting = {"started_at": "s", "ends_at": "e", "seconds_left": 100, "receipt": None}
    status = plan_status(config, sitting, 4.5, stale=False)
    assert status == {
        "course_id": "mlmeca-2025",
        "assignment": "final",
        "started_at": "s",
        "ends_at": "e",
        "seconds_left": 95.5,
        "receipt": None,
        "warn_before_s": 300,
        "fullscreen": "offered",
        "stale": False,
    }
    assert plan_status(config, sitting, 500.0, stale=True)["seconds_left"] == 0.0
    assert plan_status(config, {"seconds_left": None}, 1.0, False)["seconds_left"] is None


@pytest.mark.parametrize(
    ("settings", "warn_before_s", "fullscreen"),
    [
        ({}, 300, "offered"),  # a course app that does not say: 5 minutes, offered
        ({"warn_before_min": 12, "fullscreen": "required"}, 720, "required"),
        ({"warn_before_min": 0, "fullscreen": "offered"}, 0, "offered"),
        ({"warn_before_min": 3, "fullscreen": "bogus"}, 180, "offered"),
    ],
)
def test_the_status_sends_the_exams_own_warning_time_and_full_screen_rule(
    settings, warn_before_s, fullscreen
):
    config = config_from_env(ENV)
    assert config is not None
    status = plan_status(config, {"seconds_left": 100} | settings, 0.0, stale=False)
    assert (status["warn_before_s"], status["fullscreen"]) == (warn_before_s, fullscreen)


def test_an_exam_server_loads_the_clock_and_finds_the_built_lab_extension(tmp_path):
    args = plan_exam_args(ExamSeat("mlmeca-2025", "final", tmp_path))
    assert "--ServerApp.jpserver_extensions=coursehub.examroom.clock=True" in args
    assert f"--LabApp.extra_labextensions_path={LABEXTENSIONS}" in args
    built = json.loads((LABEXTENSIONS / "@coursehub/exam-clock/package.json").read_text())
    source = json.loads((ROOT / "labextension/package.json").read_text())
    assert (built["name"], built["version"]) == (source["name"], source["version"])
    remote = built["jupyterlab"]["_build"]["load"]
    assert (LABEXTENSIONS / "@coursehub/exam-clock" / remote).is_file()


def start_server(tmp_path: Path, environ: dict[str, str]) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"), **environ}
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}"]
    command += ["--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}"]
    command += [f"--ServerApp.root_dir={tmp_path}"]
    command += ["--ServerApp.jpserver_extensions=coursehub.examroom.clock=True"]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        try:
            requests.get(f"http://127.0.0.1:{port}/api/status", timeout=5)
            return server, port
        except requests.ConnectionError:
            time.sleep(0.3)
    raise AssertionError("jupyter server did not answer")


def get(port: int, path: str, token: str | None = TOKEN) -> requests.Response:
    headers = {"Authorization": f"token {token}"} if token else {}
    return requests.get(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=30)


@pytest.mark.slow
def test_the_clock_answers_only_on_an_exam_server_and_only_to_its_owner(tmp_path):
    (tmp_path / "plain").mkdir()
    server, port = start_server(tmp_path / "plain", {name: "" for name in ENV})
    try:
        assert get(port, "/coursehub/exam/status").status_code == 404
    finally:
        server.terminate()
        server.wait(timeout=30)
    (tmp_path / "exam").mkdir()
    dead_app = {**ENV, "COURSEHUB_EXAM_URL": f"http://127.0.0.1:{free_port()}"}
    server, port = start_server(tmp_path / "exam", dead_app)
    try:
        assert get(port, "/coursehub/exam/status", token=None).status_code == 403
        answer = get(port, "/coursehub/exam/status")
        assert answer.status_code == 502 and "did not answer" in answer.json()["message"]
        sent = requests.post(
            f"http://127.0.0.1:{port}/coursehub/exam/events",
            headers={"Authorization": f"token {TOKEN}"},
            json={"kind": "tab-hidden"},
            timeout=30,
        )
        assert sent.status_code == 502 and "did not answer" in sent.json()["error"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_spawn_gives_the_exam_server_the_course_apps_url_for_its_clock(tmp_path):
    seat = ExamSeat("mlmeca-2025", "final", tmp_path, course_app_url="http://10.0.0.5:8200")
    environment = plan_exam_traits(seat, "local", [])["environment"]
    assert environment["COURSEHUB_EXAM_URL"] == "http://10.0.0.5:8200"
    assert config_from_env(environment | {"JUPYTERHUB_USER": "u", "JUPYTERHUB_API_TOKEN": "t"})
    without = plan_exam_traits(ExamSeat("mlmeca-2025", "final", tmp_path), "local", [])
    assert "COURSEHUB_EXAM_URL" not in without["environment"]


def test_the_clock_posts_only_kinds_the_course_app_takes():
    import re

    from coursehub.catalog.examevents import BROWSER_EVENT_KINDS

    source = (ROOT / "labextension/src/index.js").read_text()
    posted = set(re.findall(r"'([a-z]+-[a-z]+)'", " ".join(re.findall(r"post\([^)]*", source))))
    assert posted == set(BROWSER_EVENT_KINDS)


def test_a_save_is_refused_once_the_last_answer_says_the_time_is_up():
    sitting = {"seconds_left": 30, "ends_at": "2026-01-12T11:00:00+00:00"}
    assert save_refusal(None, 0.0) == ""  # no answer yet: the work is saved
    assert save_refusal({"seconds_left": None}, 99.0) == ""  # not started
    assert save_refusal(sitting, 29.0) == ""
    why = save_refusal(sitting, 30.0)
    assert why.startswith("your exam time ended (2026-01-12T11:00:00+00:00): this save is refused")


class CourseAppStandIn(BaseHTTPRequestHandler):
    """The course app's sitting answer, ``seconds_left`` as the test sets it (class attribute)."""

    seconds_left = 600.0

    def do_GET(self) -> None:
        ends = "2026-01-12T11:00:00+00:00"
        left = self.seconds_left
        body = {"started_at": ends, "receipt": None, "ends_at": ends, "seconds_left": left}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def put(port: int, path: str, text: str) -> requests.Response:
    body = {"type": "file", "format": "text", "content": text}
    return requests.put(f"http://127.0.0.1:{port}/api/contents/{path}", json=body,
                        headers={"Authorization": f"token {TOKEN}"}, timeout=30)  # fmt: skip


@pytest.mark.slow
def test_an_exam_server_refuses_a_save_after_the_students_end_and_says_why(tmp_path):
    app = ThreadingHTTPServer(("127.0.0.1", 0), CourseAppStandIn)
    threading.Thread(target=app.serve_forever, daemon=True).start()
    environ = {**ENV, "COURSEHUB_EXAM_URL": f"http://127.0.0.1:{app.server_address[1]}"}
    server, port = start_server(tmp_path, environ)
    try:
        assert put(port, "answer.txt", "before the clock asked").status_code == 201
        assert get(port, "/coursehub/exam/status").json()["seconds_left"] > 0
        assert put(port, "answer.txt", "during the exam").status_code == 200
        CourseAppStandIn.seconds_left = 0.0  # the student's end (a proctor ended it)
        time.sleep(CACHE_S + 0.5)
        assert get(port, "/coursehub/exam/status").json()["seconds_left"] == 0
        late = put(port, "answer.txt", "after the end")
        assert late.status_code == 403, late.text
        assert "your exam time ended (2026-01-12T11:00:00+00:00)" in late.json()["message"]
        assert (tmp_path / "answer.txt").read_text() == "during the exam"
        assert put(port, "new.txt", "a new file after the end").status_code == 403
    finally:
        CourseAppStandIn.seconds_left = 600.0
        server.terminate()
        server.wait(timeout=30)
        app.shutdown()
        app.server_close()
