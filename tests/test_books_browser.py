"""Real Chromium (Debian's, through Playwright): a student opens the demo course's book from
its page."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coursehub.books.build import build_book
from coursehub.demo.book import prepare_demo_book
from coursehub.web import create_app
from coursehub.web.testing import dispose_app, live_server, seed_web_catalog

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
COURSE = "mlmeca-2025"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
    ),
]


# werkzeug's development server leaves a file response unclosed when the browser drops the
# connection (fonts cut short by the next page); waitress and gunicorn close it (PEP 3333).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_student_opens_the_demo_course_book_from_the_course_page(tmp_path, sqlite_template):
    sync_api = pytest.importorskip("playwright.sync_api")
    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    seed_web_catalog(f"sqlite:///{path}")
    paths = prepare_demo_book(tmp_path / "data", COURSE, books_dir=tmp_path / "books")
    outcome = build_book(paths)
    assert outcome.ok, outcome.log_path.read_text()
    app = create_app(
        {
            "DATABASE_URL": f"sqlite:///{path}",
            "DEV_USER": "p2500001",  # a student of the course
            "SECRET_KEY": "browser-test",
            "BOOKS_DIR": str(paths.root),
        },
        environ={},
    )
    try:
        with (
            live_server(app) as base,
            sync_api.sync_playwright() as playwright,
        ):
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = chromium.new_page()
                page.goto(f"{base}/courses/{COURSE}/")
                assert "Build book" not in page.inner_text("main")
                page.get_by_role("link", name="Read the course book").click()
                page.wait_for_url(f"**/courses/{COURSE}/book/intro.html")  # index.html redirects
                assert page.get_by_role("heading", name="Machine Learning for Mechanics").count()
                page.locator("article a[href='double_pendulum.html']").first.click()
                page.wait_for_url("**/book/double_pendulum.html")
                heading = page.get_by_role("heading", level=1).first.inner_text()
                assert "double pendulum" in heading.lower()
            finally:
                chromium.close()
    finally:
        dispose_app(app)
