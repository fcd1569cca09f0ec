"""A course's book in the course app: served to members (anyone once public), safe paths, builds."""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import replace

import pytest

from coursehub.books.build import build_book, is_building
from coursehub.books.settings import BookPaths, BookSettings, read_settings, write_settings
from coursehub.demo.book import prepare_demo_book
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)
from coursehub.web.views.books import plan_files_key, plan_rewrite_links

COURSE = "mlmeca-2025"
BOOK = f"/courses/{COURSE}/book/"


@pytest.fixture(scope="module")
def books_dir(tmp_path_factory):
    """The demo book (intro and the pendulum notebook) built once for the test course."""
    root = tmp_path_factory.mktemp("books")
    paths = prepare_demo_book(tmp_path_factory.mktemp("data"), COURSE, books_dir=root)
    outcome = build_book(paths)
    assert outcome.ok, outcome.log_path.read_text()
    return root


@pytest.fixture
def app(database_url, books_dir):
    seed_web_catalog(database_url)
    paths = BookPaths(books_dir, COURSE)
    settings = read_settings(paths)
    application = make_test_app(database_url, BOOKS_DIR=str(books_dir))
    yield application
    dispose_app(application)
    write_settings(paths, settings)  # a test that made it public leaves it as it was


def get(app, url, who):
    """GET ``url`` as ``who``; the answer read and closed (a file's handle released)."""
    answer = app.test_client().get(url, headers=identity_headers(IDENTITIES[who]))
    answer.get_data()
    answer.close()
    return answer


def test_the_book_is_served_to_a_member_in_a_sandbox(app):
    answer = get(app, BOOK + "double_pendulum.html", "student")
    assert answer.status_code == 200
    assert "double pendulum" in answer.get_data(as_text=True).lower()
    assert answer.headers["Content-Security-Policy"].startswith("sandbox")
    assert get(app, BOOK, "student").status_code == 200  # index.html


def test_the_book_is_refused_to_a_non_member_and_anonymous_readers_sign_in(app):
    assert get(app, BOOK + "intro.html", "other_teacher").status_code == 403
    anonymous = get(app, BOOK + "intro.html", "anonymous")
    assert anonymous.status_code == 302 and "login" in anonymous.headers["Location"]


def test_a_public_book_is_served_to_anyone(app, books_dir):
    paths = BookPaths(books_dir, COURSE)
    write_settings(paths, replace(read_settings(paths), public=True))
    for who in ("anonymous", "other_teacher"):
        answer = get(app, BOOK + "intro.html", who)
        assert answer.status_code == 200, who
        assert "Machine Learning for Mechanics" in answer.get_data(as_text=True)


@pytest.mark.parametrize(
    "path",
    [
        "../settings.json",
        "..%2fsettings.json",
        "%2e%2e/%2e%2e/state.json",
        "_static/../../../../settings.json",
        "/etc/passwd",
        "leak.json",
    ],
)
def test_paths_out_of_the_book_are_refused(app, books_dir, path):
    current = BookPaths(books_dir, COURSE).current
    link = current / "leak.json"
    if not link.is_symlink():
        link.symlink_to(books_dir / COURSE / "settings.json")  # a link out of the book
    answer = get(app, BOOK + path, "lead")
    if answer.status_code == 308:  # werkzeug merges "//": the address stays in the book
        assert answer.headers["Location"].endswith(BOOK + "etc/passwd")
    else:
        assert answer.status_code == 404
    assert "source_dir" not in answer.get_data(as_text=True)


def test_the_course_page_links_the_book_and_offers_a_build_to_the_team_only(app):
    student = get(app, f"/courses/{COURSE}/", "student").get_data(as_text=True)
    assert "Read the course book" in student and "Build book" not in student
    lead = get(app, f"/courses/{COURSE}/", "lead").get_data(as_text=True)
    assert "Build book" in lead and "Make the book public" in lead
    assert 'id="book-source"' in lead and 'id="book-source"' not in student  # a host path
    answer = app.test_client().post(
        f"/courses/{COURSE}/book/build", headers=identity_headers(IDENTITIES["student"])
    )
    assert answer.status_code in (400, 403)  # no CSRF token, and no right either


def test_a_build_without_a_book_configuration_shows_why_on_the_course_page(database_url, tmp_path):
    seed_web_catalog(database_url)
    (tmp_path / "src").mkdir()
    paths = BookPaths(tmp_path / "books", COURSE)
    write_settings(paths, BookSettings(source_dir=str(tmp_path / "src")))
    application = make_test_app(database_url, BOOKS_DIR=str(paths.root), WTF_CSRF_ENABLED=False)
    try:
        client = application.test_client()
        headers = identity_headers(IDENTITIES["grader"])
        started = client.post(f"/courses/{COURSE}/book/build", headers=headers)
        assert started.status_code == 302
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            is_building(paths) or '"queued"' in paths.state.read_text()
        ):
            time.sleep(0.2)
        page = client.get(f"/courses/{COURSE}/", headers=headers).get_data(as_text=True)
        assert "no Jupyter Book configuration" in page
        log = client.get(f"/courses/{COURSE}/book-log", headers=headers).get_data(as_text=True)
        assert "no Jupyter Book configuration" in log
    finally:
        dispose_app(application)
        shutil.rmtree(tmp_path / "books", ignore_errors=True)


F = "/courses/c/book-files/k/"


@pytest.mark.parametrize(
    ("page", "html", "expected"),
    [
        (
            "intro.html",
            '<link href="_static/a.css?v=1" rel=x>',
            f'<link href="{F}_static/a.css?v=1" rel=x>',
        ),
        ("ch/one.html", "<img src='../_images/p.png'>", f"<img src='{F}_images/p.png'>"),
        (
            "ch/one.html",
            '<script src="../searchindex.js"></script>',
            f'<script src="{F}searchindex.js"></script>',
        ),
        ("intro.html", '<a href="page2.html#s">', '<a href="page2.html#s">'),
        ("intro.html", '<a href="ch/">', '<a href="ch/">'),
        ("intro.html", '<a href="https://x.org/a.css">', '<a href="https://x.org/a.css">'),
        ("intro.html", '<a href="/courses/c/">', '<a href="/courses/c/">'),
        ("intro.html", '<a href="../../settings.json">', '<a href="../../settings.json">'),
        ("intro.html", '<a href="#top">', '<a href="#top">'),
    ],
)
def test_a_pages_links_to_files_that_are_not_pages_point_at_the_build_files_address(
    page, html, expected
):
    assert plan_rewrite_links(html, page, F) == expected


def test_a_member_gets_the_books_style_sheets_without_a_session_at_an_unguessable_address(
    app, books_dir
):
    page = get(app, BOOK + "intro.html", "student").get_data(as_text=True)
    sheets = re.findall(r'href="(/courses/[^"]+/book-files/([0-9a-f]{32})/[^"?]+\.css)', page)
    assert sheets, page[:2000]
    url, key = sheets[0]
    from coursehub.books.build import served_build

    assert key == plan_files_key("test-secret", COURSE, served_build(BookPaths(books_dir, COURSE)))
    sheet = get(app, url, "anonymous")  # the opaque origin of a page sends no cookie
    assert sheet.status_code == 200 and "css" in sheet.headers["Content-Type"]
    assert sheet.headers["Content-Security-Policy"].startswith("sandbox")
    files = f"/courses/{COURSE}/book-files/{key}/"
    wrong = f"/courses/{COURSE}/book-files/{'0' * 32}/"
    assert get(app, url.replace(files, wrong), "anonymous").status_code == 404
    for path in ("intro.html", "", "_static/", "../settings.json", "_static/../../../state.json"):
        assert get(app, files + path, "anonymous").status_code in (404, 308), path
    assert get(app, f"/courses/{COURSE}/book/intro.html", "anonymous").status_code == 302
