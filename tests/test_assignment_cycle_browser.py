"""The whole assignment cycle from the course page, in real Chromium, with three students.

A teacher creates the assignment by uploading its notebook (due date, late
policy), generates and releases it; three students fetch and submit through
nbgrader's exchange (what their Lab's assignment list runs), a fourth does
nothing; the teacher collects, autogrades (in the background: the page
follows its progress), releases feedback and downloads the exports; each
student fetches their own feedback; a student never reaches the page.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import nbformat
import pytest

from appbrowser import CHROMIUM
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import fetch_assignment, fetch_feedback, submit_assignment
from coursehub.grading.layout import layout_from_env
from coursehub.web.app import create_app
from coursehub.web.testing import dispose_app, live_server, seed_web_catalog

CORRECT = (
    "    a, b, c = (M1 + M2) * L1**2, M2 * L2**2, M2 * L1 * L2\n"
    "    kinetic = a * omega1**2 / 2 + b * omega2**2 / 2"
    " + c * omega1 * omega2 * np.cos(theta1 - theta2)\n"
    "    return kinetic - (M1 + M2) * G * L1 * np.cos(theta1) - M2 * G * L2 * np.cos(theta2)"
)
#: The seeded course's students (coursehub.catalog.seed.seed_demo) and what they write.
ANSWERS = {"p2500001": CORRECT, "p2500002": "    return 0.0 * theta1", "p2500003": CORRECT}
SCORES = {"p2500001": "4", "p2500002": "0", "p2500003": "4", "p2500004": "not submitted"}

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
]


@pytest.fixture
def course(tmp_path, sqlite_template, monkeypatch):
    """The seeded catalog, grading set up for mlmeca-2025 (its gradebook has the 4 students)."""
    from coursehub.catalog.db import make_engine, session_scope
    from coursehub.grading.course import setup_course

    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite:///{path}"
    seed_web_catalog(url)
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", url)  # the background autograde reads it
    # the demo's layout: the catalog's folder holds the courses and the exchange, and the
    # course app passes it on to the autograde (as root, the sandbox hides it whole)
    monkeypatch.setenv("COURSEHUB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    monkeypatch.setenv("COURSEHUB_GRADING_TIMEZONE", "Europe/Paris")
    layout = layout_from_env("mlmeca-2025")
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            setup_course(session, "mlmeca-2025", layout)
    finally:
        engine.dispose()
    return url, layout


@pytest.fixture
def serve(course):
    url, _ = course
    apps = []

    def start(user: str, groups: list[str]):
        config = {
            "DATABASE_URL": url,
            "DEV_USER": user,
            "DEV_GROUPS": groups,
            "SECRET_KEY": "cycle-test",
        }
        app = create_app(config, environ={})
        apps.append(app)
        return live_server(app)

    yield start
    for app in apps:
        dispose_app(app)


def answer_and_submit(layout, home: Path, student: str) -> None:
    folder = fetch_assignment(layout.exchange_root, layout.course_id, "ps1", student, home)
    path = folder / f"{DEMO_ASSIGNMENT}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.metadata["nbgrader"]["grade_id"] == "energy")
    cell.source = cell.source.replace(
        "    # YOUR CODE HERE\n    raise NotImplementedError()", ANSWERS[student]
    )
    nbformat.write(notebook, path)
    submit_assignment(layout.exchange_root, layout.course_id, "ps1", student, home)


def click_step(page, label: str, flash: str) -> None:
    page.get_by_role("button", name=label, exact=True).click()
    page.get_by_text(flash).first.wait_for()


def test_the_assignment_cycle_runs_from_the_course_page(course, serve, browser, tmp_path):
    _, layout = course
    with serve("tdupont", ["teachers"]) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base + "/courses/mlmeca-2025/")
        page.get_by_role("link", name="Assignments").click()
        page.get_by_role("link", name="New assignment").click()
        page.get_by_label("Assignment name").fill("ps1")
        page.get_by_label("Source notebook").set_input_files(
            str(demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb")
        )
        page.get_by_label("Due date", exact=True).fill("2099-06-30T18:00")
        page.get_by_label("Late submissions").select_option("per_hour")
        page.get_by_label("Points off per hour late").fill("1")
        page.get_by_role("button", name="Create assignment").click()
        page.get_by_text("Assignment ps1 created").wait_for()
        assert "2099-06-30 18:00 CEST (Europe/Paris)" in page.inner_text("main")  # the course zone
        assert "1 point(s) off per hour late" in page.inner_text("main")
        click_step(page, "Generate ps1", "ps1 generated.")
        click_step(page, "Release ps1", "ps1 released.")

        for student in ANSWERS:  # what each student's Lab does through the exchange
            answer_and_submit(layout, tmp_path / "home" / student, student)
        page.reload()
        assert "Submitted3: p2500001, p2500002, p2500003" in page.inner_text("main").replace(
            "\n", ""
        ).replace("\t", "")

        click_step(page, "Collect ps1", "ps1 collected.")
        click_step(page, "Autograde ps1", "ps1 sent to autograding.")
        # the page follows the background run, then shows the outcome
        page.get_by_text("Autograde done: 3 / 3 graded").wait_for(timeout=240_000)
        click_step(page, "Feedback ps1", "ps1 given feedback")

        table = {
            row.get_attribute("data-student"): row.locator("td").nth(2).inner_text()
            for row in page.locator("#grade-table tbody tr").all()
        }
        assert table == SCORES
        with page.expect_download() as download:
            page.get_by_role("link", name="Moodle CSV (username)").click()
        moodle = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
        # students by last name: Lefèvre, Moreau, N'Diaye, Ølsen
        assert moodle == [
            ["Username", "ps1"],
            ["p2500001", "4.0"],
            ["p2500003", "4.0"],
            ["p2500004", ""],
            ["p2500002", "0.0"],
        ]
        with page.expect_download() as download:
            page.get_by_role("link", name="Export grades (nbgrader CSV)").click()
        rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
        assert {r["student_id"]: r["score"] for r in rows} == {
            "p2500001": "4.0",
            "p2500002": "0.0",
            "p2500003": "4.0",
            "p2500004": "0.0",
        }
        page.close()

    for student in ANSWERS:  # each student's Lab fetches their own feedback
        [html] = fetch_feedback(
            layout.exchange_root, layout.course_id, "ps1", student, tmp_path / "home" / student
        )
        score = "4.0" if ANSWERS[student] == CORRECT else "0.0"
        assert f"pendulum_energy (Score: {score} / 4.0)" in html.read_text()

    with serve("p2500001", []) as base:
        page = browser.new_page()
        for path in ("", "/new", "/grades.csv", "/grades-moodle.csv", "/ps1/progress.json"):
            response = page.goto(base + "/courses/mlmeca-2025/grading" + path)
            assert response is not None and response.status == 403
        page.close()
