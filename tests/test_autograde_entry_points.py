"""One hostile submission through every way a course gets autograded: it gets nothing.

The same batch (an honest and a hostile submission from the course's
roster) is autograded through the command line (``coursehub grading
autograde``) and through the course page's button (a detached autograde
the course app starts); the formgrader's own "autograde" button, in a live
hub where the formgrader runs as its course's account, is in
``tests/test_formgrader_browser_lockdown.py``. Each time the honest
submission gets its full score and the hostile one reads nothing that is
not its own: no token in its environment or in any ``/proc/*/environ``,
neither the gradebook, another student's submission, the course's source,
the catalog nor ``/etc/shadow``, no connection to a port of the host. The
course is made world-readable on purpose, so that only the sandbox stands
between the student's code and those files.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import nbformat
import pytest

from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    release_assignment,
)
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.layout import CourseLayout, ensure_course, layout_from_env
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)
from test_autograde_sandbox import HOSTILE, SECRET_ENV
from test_grading_e2e import CORRECT, answer_assignment
from test_grading_web import csrf_token

COURSE, PS = "mlmeca-2025", "ps1"
#: Two students of the seeded roster (coursehub.web.testing.seed_web_catalog).
HONEST, MALLORY = "p2500001", "p2500002"
TEACHER = identity_headers(IDENTITIES["teacher"])
NOTHING = {"env": [], "proc": [], "readable": [], "writable": [], "net": False}

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def database_backend() -> str:
    """SQLite only: the entry points, not the catalog's backends, are what varies here."""
    return "sqlite"


@pytest.fixture
def course(tmp_path, monkeypatch, database_url, sandbox_user) -> tuple[CourseLayout, list[str]]:
    """The course with the honest and the hostile submission collected; the hostile's targets."""
    from coursehub.sandbox.command import sandbox_mode

    if sandbox_mode() != "root":
        pytest.skip("this host cannot make namespaces")
    tmp_path.chmod(0o755)  # world-readable on purpose: only the sandbox protects the files
    for name, value in SECRET_ENV.items():  # what the course app's own environment holds
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", database_url)
    monkeypatch.setenv("COURSEHUB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    monkeypatch.setenv("COURSEHUB_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSEHUB_GRADER_USER", sandbox_user)
    seed_web_catalog(database_url)
    layout = layout_from_env(COURSE)
    ensure_course(layout)
    add_assignment(layout, PS, [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
    generate_assignment(layout, PS)
    release_assignment(layout, PS)
    submit(layout, tmp_path, HONEST, CORRECT)
    collect(layout, PS)
    catalog = database_url.removeprefix("sqlite:///")
    targets = [
        str(layout.gradebook_path),
        str(next((layout.course_dir / "submitted" / HONEST).rglob("*.ipynb"))),
        str(next((layout.course_dir / "source").rglob("*.ipynb"))),
        catalog,
        "/etc/shadow",
    ]
    return layout, targets


def submit(layout: CourseLayout, root: Path, student: str, body: str) -> None:
    answer_assignment(layout, root, PS, student, body)


def hostile_submission(layout: CourseLayout, root: Path, targets: list[str], port: int) -> None:
    code = textwrap.indent(HOSTILE.format(targets=targets, port=port), "    ")
    submit(layout, root, MALLORY, code + CORRECT)
    collect(layout, PS)
    subprocess.run(["chmod", "-R", "a+rwX", str(root / "courses")], check=True)


def scores(layout: CourseLayout) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with warnings.catch_warnings(), Gradebook(layout.db_url) as gradebook:
        warnings.simplefilter("ignore")  # nbgrader's own SQLAlchemy warnings
        return {
            s.student.id: s.score for s in gradebook.find_assignment(PS).submissions if s.student
        }


def what_mallory_found(layout: CourseLayout) -> dict[str, object]:
    path = layout.course_dir / "autograded" / MALLORY / PS / f"{DEMO_ASSIGNMENT}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert "FOUND" in printed, printed
    return json.loads(printed.split("FOUND", 1)[1].splitlines()[0])


def test_through_the_command_line(course, tmp_path):
    layout, targets = course
    with socket.create_server(("127.0.0.1", 0)) as listener:
        hostile_submission(layout, tmp_path, targets, listener.getsockname()[1])
        done = subprocess.run(
            [sys.executable, "-m", "coursehub", "grading", "autograde", COURSE, PS],
            capture_output=True,
            text=True,
            timeout=600,
            env=os.environ.copy(),
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert {s: scores(layout)[s] for s in (HONEST, MALLORY)} == {HONEST: 4.0, MALLORY: 4.0}
    assert what_mallory_found(layout) == NOTHING


def test_through_the_course_pages_button(course, tmp_path, database_url):
    layout, targets = course
    app = make_test_app(database_url)
    try:
        client = app.test_client()
        page = f"/courses/{COURSE}/grading"
        with socket.create_server(("127.0.0.1", 0)) as listener:
            hostile_submission(layout, tmp_path, targets, listener.getsockname()[1])
            token = csrf_token(client.get(page, headers=TEACHER).get_data(as_text=True))
            answer = client.post(
                f"{page}/{PS}/autograde", headers=TEACHER, data={"csrf_token": token}
            )
            assert answer.status_code == 302, answer.get_data(as_text=True)[:500]
            deadline = time.monotonic() + 600
            while True:
                state = client.get(f"{page}/{PS}/progress.json", headers=TEACHER).get_json()
                ended = state["state"] not in ("not-started", "starting", "running")
                if ended or time.monotonic() > deadline:
                    break
                time.sleep(1)
    finally:
        dispose_app(app)
    assert state["state"] not in ("not-started", "starting", "running"), state
    assert state["graded"] >= 2 and not state["failures"], state
    assert {s: scores(layout)[s] for s in (HONEST, MALLORY)} == {HONEST: 4.0, MALLORY: 4.0}
    assert what_mallory_found(layout) == NOTHING
