"""Real Chromium (Debian's, through Playwright) against the app served by werkzeug in dev mode.

A portal manager creates a course, imports a roster through preview and
confirm, and sees the students; a teacher who manages no portal is told who
creates courses; a student of that course cannot reach its management pages.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from appbrowser import CHROMIUM
from coursehub.web.app import create_app
from coursehub.web.testing import dispose_app, live_server, seed_web_catalog

ROSTER = (
    "N° étudiant;Nom;Prénom;Courriel;Groupe\n"
    "p2600001;Noether;Emmy;emmy.noether@etu.example.org;TD1\n"
    "p2600002;Germain;Sophie;sophie.germain@etu.example.org;TD1\n"
    "p2600003;Kovalevskaya;Sofia;sofia.kovalevskaya@etu.example.org;TD2\n"
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
    ),
]


@pytest.fixture
def catalog_url(tmp_path, sqlite_template):
    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    seed_web_catalog(f"sqlite:///{path}")
    return f"sqlite:///{path}"


@pytest.fixture
def serve(catalog_url):
    """Start a dev-mode server acting as the given user; yield its base URL."""
    apps = []

    def start(user: str, groups: list[str]):
        app = create_app(
            {
                "DATABASE_URL": catalog_url,
                "DEV_USER": user,
                "DEV_GROUPS": groups,
                "SECRET_KEY": "browser-test",
            },
            environ={},
        )
        apps.append(app)
        return live_server(app)

    yield start
    for app in apps:
        dispose_app(app)


def make_manager(url: str, username: str, code: str) -> None:
    from coursehub.catalog.admin import add_manager
    from coursehub.catalog.courses import get_portal
    from coursehub.catalog.db import make_engine, session_scope

    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            add_manager(session, get_portal(session, code), username)
    finally:
        engine.dispose()


def test_manager_creates_course_imports_roster_and_student_is_kept_out(
    serve, browser, tmp_path, catalog_url
):
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    with serve("tdupont", ["teachers"]) as base:
        page = browser.new_page()
        page.goto(base + "/")
        assert page.get_by_role("link", name="New course").count() == 0
        assert page.goto(base + "/courses/new").status == 403
        assert "a manager of a portal can create courses" in page.inner_text("main")
        page.close()
    make_manager(catalog_url, "oteacher", "MECA")
    with serve("oteacher", ["teachers"]) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base + "/")
        page.get_by_role("link", name="New course").click()
        page.get_by_label("UE code").fill("PHYS1")
        page.get_by_label("Academic year").select_option("2025-2026")
        page.get_by_label("Portal").select_option("MECA")
        page.get_by_label("Title").fill("Physics of chaos")
        page.get_by_role("button", name="Create course").click()
        page.get_by_text("Course phys1-2025 created.").wait_for()

        page.get_by_role("link", name="Import roster").click()
        page.get_by_label("Roster file (CSV)").set_input_files(str(roster))
        page.get_by_role("button", name="Preview").click()
        page.get_by_text("Nothing has been written yet").wait_for()
        assert page.locator("#additions tbody tr").count() == 3
        page.get_by_role("button", name="Confirm import").click()
        page.get_by_text("Roster imported: 3 added, 0 updated, 0 removed.").wait_for()
        students = page.locator("section[aria-labelledby=students-title]")
        for name in ("Noether", "Germain", "Kovalevskaya"):
            assert name in students.inner_text()
        shots = Path(os.environ.get("COURSEHUB_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "course-page.png"), full_page=True)
        page.close()

    with serve("p2600001", []) as base:
        page = browser.new_page()
        page.goto(base + "/courses/phys1-2025/")
        main = page.inner_text("main")
        assert "student, group TD1" in main and "Germain" not in main and "Students (" not in main
        assert page.get_by_role("link", name="Import roster").count() == 0
        for path in ("/edit", "/roster", "/members", "/groups"):
            response = page.goto(base + "/courses/phys1-2025" + path)
            assert response is not None and response.status == 403
            assert "you do not have access to this page" in page.inner_text("main")
        assert page.goto(base + "/courses/new").status == 403
        page.close()
