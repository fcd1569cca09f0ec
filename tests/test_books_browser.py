"""Real Chromium (Debian's, through Playwright): a student opens the demo course's book from
its page."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from coursehub.books.build import build_book
from coursehub.demo.book import prepare_demo_book
from coursehub.web.app import create_app
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


#: Raw HTML of a book page: its script tries to read the course page as the reader.
PROBE = """
<div id="probe">waiting</div>
<script>
fetch("/courses/mlmeca-2025/", {credentials: "include"})
  .then((r) => r.text())
  .then((t) => { document.getElementById("probe").textContent =
    t.includes("Read the course book") ? "READ" : "NOT-READ"; })
  .catch(() => { document.getElementById("probe").textContent = "BLOCKED"; });
</script>
"""


def hub_session_cookie(app, name: str) -> str:
    """The signed session cookie of a hub user signed in just now (as after the OAuth login)."""
    from coursehub.web.identity import Identity

    serializer = app.session_interface.get_signing_serializer(app)
    data = {"identity": Identity(name, False, ()).to_session(), "checked_at": time.time()}
    return serializer.dumps(data)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signed_in_member_sees_the_styled_book_and_its_scripts_cannot_read_the_app(
    tmp_path, sqlite_template
):
    sync_api = pytest.importorskip("playwright.sync_api")
    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    seed_web_catalog(f"sqlite:///{path}")
    paths = prepare_demo_book(tmp_path / "data", COURSE, books_dir=tmp_path / "books")
    intro = tmp_path / "data" / "book-source" / COURSE / "intro.md"
    intro.write_text(intro.read_text() + "\n" + PROBE)
    outcome = build_book(paths)
    assert outcome.ok, outcome.log_path.read_text()
    app = create_app(
        {
            "DATABASE_URL": f"sqlite:///{path}",
            "HUB_API_TOKEN": "service-token",  # hub mode: the session cookie says who reads
            "HUB_CLIENT_ID": "service-coursehub",
            "HUB_API_URL": "http://127.0.0.1:9/hub/api",
            "SECRET_KEY": "browser-test",
            "BOOKS_DIR": str(paths.root),
        },
        environ={},
    )
    try:
        with live_server(app) as base, sync_api.sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                context = chromium.new_context()
                cookie = {"name": app.config["SESSION_COOKIE_NAME"], "url": base}
                cookie |= {"value": hub_session_cookie(app, "p2500001"), "sameSite": "Lax"}
                context.add_cookies([cookie])
                page = context.new_page()
                sheets: list[tuple[str, int]] = []
                page.on(
                    "response",
                    lambda r: sheets.append((r.url, r.status)) if ".css" in r.url else None,
                )
                page.goto(f"{base}/courses/{COURSE}/")
                assert "Read the course book" in page.inner_text("main")  # the session works
                page.goto(f"{base}/courses/{COURSE}/book/intro.html")
                page.wait_for_load_state("networkidle")
                assert sheets and all(status == 200 for _url, status in sheets), sheets
                # sphinx-book-theme's style sheet is applied: its primary sidebar is a flex box
                shown = page.evaluate(
                    "getComputedStyle(document.querySelector('.bd-sidebar-primary')).display"
                )
                assert shown == "flex"
                page.wait_for_function("document.getElementById('probe').textContent !== 'waiting'")
                assert page.inner_text("#probe") in ("BLOCKED", "NOT-READ")
            finally:
                chromium.close()
    finally:
        dispose_app(app)
