"""The hub's exam check against the real course app: what the spawn asks, the app answers.

The course app (a fresh test app and catalog, served over HTTP on a local
port by ``wsgiref``) holds an exam a student started;
:meth:`coursehub.spawn.examserver.ExamServers.seat` asks it with the server's
token, as the hub does before a start.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

from coursehub.spawn.examserver import ExamServers
from coursehub.web.testing import api_headers

COURSE = "mlmeca-2025"
EXAMS = f"/api/v1/courses/{COURSE}/exams"


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(app) -> Iterator[str]:
    """The course app's root URL, served on a local port for the test."""
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


def spawner_of(username: str, part: str) -> SimpleNamespace:
    """What the exam check reads of a spawner: the user's name, the server's token, a log."""
    return SimpleNamespace(
        user=SimpleNamespace(name=username),
        api_token=api_headers(part)["Authorization"].removeprefix("token "),
        log=logging.getLogger("test"),
        _log_name=username,
    )


def seat_of(url: str, username: str, part: str, courses: list[str]):
    exams = ExamServers(url, exam_root="/srv/exams")
    return asyncio.run(exams.seat(spawner_of(username, part), courses))


def test_the_hub_finds_a_students_running_exam_and_nothing_for_others(client, served):
    now = datetime.now(UTC)
    body = {
        "assignment": "final",
        "opens_at": (now - timedelta(minutes=5)).isoformat(timespec="seconds"),
        "duration_min": 60,
        "hard_end": (now + timedelta(hours=2)).isoformat(timespec="seconds"),
        "allowed_imports": "numpy",
    }
    created = client.post(EXAMS, json=body, headers=api_headers("lead"))
    assert created.status_code == 201, created.get_json()
    assert seat_of(served, "p2500001", "student", [COURSE]) is None  # not started yet
    started = client.post(EXAMS + "/final/start", headers=api_headers("student"))
    assert started.status_code == 200, started.get_json()
    seat = seat_of(served, "p2500001", "student", ["no-such-course", COURSE])
    assert seat is not None
    assert (seat.course_id, seat.assignment, seat.allowed_imports) == (COURSE, "final", "numpy")
    assert seat.home == Path("/srv/exams/mlmeca-2025/final/p2500001")
    assert seat.course_app_url == served.rstrip("/")  # where the exam clock asks
    assert seat_of(served, "p2509001", "other_student", [COURSE]) is None
    assert seat_of(served, "tdupont", "teacher", [COURSE]) is None
