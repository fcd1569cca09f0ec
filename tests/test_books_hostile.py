"""A hostile book (its own configuration, links out, code) through every entry point of a build.

The bad book runs through ``coursehub book build`` and the course page's "Build book"; it gets
nothing (no notebook run, no host file copied, no traceback), while an honest book of the same
run builds. With execution allowed, the notebooks run in the sandbox (:mod:`coursehub.sandbox`).
"""

from __future__ import annotations

import html
import json
import os
import secrets
import time
from pathlib import Path

import pytest

from coursehub.books.bookconfig import plan_safe_config
from coursehub.books.build import build_book, is_building
from coursehub.books.plan import plan_links_out
from coursehub.books.settings import BookPaths, BookSettings, read_state, write_settings
from coursehub.cli import main
from coursehub.material.credential import parse_credential, store_credential, stored_kind
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirror import update_mirror
from coursehub.material.mirrortypes import MirrorSource
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)
from material_gitserver import allow_loopback, commit_files, git, serve_git, teacher_repo
from test_books_build import book_files

HONEST = "honest-2025"
HOSTILE = "hostile-2025"
LINKS = "links-2025"
WEB_COURSE = "mlmeca-2025"  # a course of the seeded web catalog


@pytest.mark.parametrize(
    ("user", "kept", "dropped"),
    [
        ({"title": "T", "author": "A", "logo": "logo.png"}, ["author", "logo", "title"], []),
        ({"logo": "../../../etc/secret.png"}, [], ["logo"]),
        ({"bibtex_bibfiles": ["refs.bib"]}, ["bibtex_bibfiles"], []),
        ({"bibtex_bibfiles": ["/root/private.bib"]}, [], ["bibtex_bibfiles"]),
        ({"execute": {"execute_notebooks": "force"}}, [], ["execute.execute_notebooks"]),
        ({"launch_buttons": {"binderhub_url": "https://x"}}, [], ["launch_buttons"]),
        (
            {"html": {"favicon": "f.ico", "comments": {"hypothesis": True}}},
            ["html"],
            ["html.comments"],
        ),
        ({"sphinx": {"extra_extensions": ["evil"]}}, [], ["sphinx.extra_extensions"]),
        (
            {"sphinx": {"config": {"nb_execution_mode": "force", "html_title": "B"}}},
            ["sphinx"],
            ["sphinx.config.nb_execution_mode"],
        ),
        (
            {
                "sphinx": {
                    "config": {
                        "html_extra_path": ["../../../../srv/material/private"],
                        "html_static_path": ["/etc"],
                        "templates_path": ["_templates"],
                        "extensions": ["sphinx.ext.autodoc"],
                        "nb_execution_excludepatterns": [],
                    }
                }
            },
            [],
            [
                "sphinx.config.extensions",
                "sphinx.config.html_extra_path",
                "sphinx.config.html_static_path",
                "sphinx.config.nb_execution_excludepatterns",
                "sphinx.config.templates_path",
            ],
        ),
        (
            {"sphinx": {"config": {"html_theme_options": {"logo": {"image_light": "/etc/x"}}}}},
            [],
            ["sphinx.config.html_theme_options"],
        ),
        (
            {"sphinx": {"config": {"html_theme_options": {"repository_url": "https://g/r"}}}},
            ["sphinx"],
            [],
        ),
    ],
)
def test_a_books_own_configuration_keeps_only_keys_that_neither_run_code_nor_read_host_files(
    user, kept, dropped
):
    safe, left_out = plan_safe_config(user)
    assert sorted(safe) == kept
    assert left_out == dropped


@pytest.mark.parametrize(
    ("links", "folder", "refused"),
    [
        ([("notes/data.csv", "../data/data.csv")], "", []),
        ([("passwd", "/etc/passwd")], "", ["passwd -> /etc/passwd"]),
        ([("a/up", "../../../../")], "", ["a/up -> ../../../../"]),
        ([("book/x", "../shared/x.csv")], "book", ["book/x -> ../shared/x.csv"]),
        ([("book/x", "img/y.png")], "book", []),
        ([("other/x", "../book/y.md")], "book", []),
        ([("other/x", "/etc/shadow")], "book", ["other/x -> /etc/shadow"]),
    ],
)
def test_links_leaving_the_book_are_named_and_links_inside_it_are_not(links, folder, refused):
    assert plan_links_out(links, folder) == refused


def hostile_files(private: Path, marker: Path) -> dict[str, str]:
    """A book whose _config.yml runs its notebook and copies ``private`` into the HTML."""
    up = "../" * 20 + str(private).lstrip("/")
    config = (
        "title: Hostile book\n"
        "sphinx:\n"
        "  config:\n"
        "    nb_execution_mode: force\n"
        f"    html_extra_path: ['{up}']\n"
        f"    html_static_path: ['{up}']\n"
    )
    code = f"open({str(marker)!r}, 'w').write('ran')"
    # MyST substitutions are Jinja2 run at build time; a page's front matter turns them on
    page = (
        "---\nmyst:\n  enable_extensions: [substitution]\n---\n"
        "# Introduction\n\nThe first page. {{ 7 * 1000003 }}\n"
    )
    config += "parse:\n  myst_enable_extensions: [colon_fence, substitution]\n"
    return {**book_files(code=code), "_config.yml": config, "intro.md": page}


@pytest.fixture(scope="module")
def materials(tmp_path_factory):
    """One material root holding an honest, a hostile and a link-holding course material."""
    root = tmp_path_factory.mktemp("hostile-git")
    token = "glpat-" + secrets.token_hex(16)
    (root / "server").mkdir()
    layout = MaterialLayout(root / "material").ensure()
    marker = root / "executed.txt"
    private = layout.root  # the mirrors and every course's credential
    repos = {
        HONEST: teacher_repo(root / "server", HONEST, book_files()),
        HOSTILE: teacher_repo(root / "server", HOSTILE, hostile_files(private, marker)),
        WEB_COURSE: teacher_repo(root / "server", WEB_COURSE, hostile_files(private, marker)),
        LINKS: teacher_repo(root / "server", LINKS, book_files()),
    }
    (repos[LINKS] / "passwd").symlink_to("/etc/passwd")
    commit_files(repos[LINKS], {}, "an absolute link")
    git("push", "--quiet", "origin", "main", cwd=repos[LINKS])
    with allow_loopback(), serve_git(root / "server", "deploy", token) as base:
        for course in repos:
            store_credential(layout, course, parse_credential(f"deploy:{token}".encode(), "t"))
            kind = stored_kind(layout, course)
            source = MirrorSource(course, f"{base}/{course}.git", "main", "", kind)
            update_mirror(layout, source, accept_rewrite=True)
    return layout, marker, token


def test_a_hostile_book_built_from_the_command_line_runs_nothing_and_copies_no_host_file(
    materials, tmp_path, monkeypatch, capsys
):
    layout, marker, token = materials
    monkeypatch.setenv("COURSEHUB_MATERIAL_DIR", str(layout.root))
    books = tmp_path / "books"
    assert main(["book", "--books-dir", str(books), "build", HOSTILE]) == 0, capsys.readouterr()
    assert main(["book", "--books-dir", str(books), "build", HONEST]) == 0, capsys.readouterr()
    assert not marker.exists()  # nb_execution_mode: force did not run the notebook
    served = BookPaths(books, HOSTILE).current
    files = [p for p in served.rglob("*") if p.is_file()]
    assert not any(token in p.read_text(errors="replace") for p in files)
    assert not (served / "credentials").exists() and not (served / "published").exists()
    state = read_state(BookPaths(books, HOSTILE))
    assert {"sphinx.config.nb_execution_mode", "sphinx.config.html_extra_path"} <= set(
        state["dropped_keys"]
    )
    log = Path(state["log"]).read_text()
    assert "left out (not allowed in a course book)" in log and "html_extra_path" in log
    assert "The first page." in (BookPaths(books, HONEST).current / "intro.html").read_text()
    page = (served / "intro.html").read_text()
    assert "7000021" not in page and "1000003" in page  # shown as text, never rendered
    assert "parse.myst_enable_extensions.substitution" in state["dropped_keys"]


def test_a_material_with_an_absolute_link_is_refused_in_one_line_while_an_honest_one_builds(
    materials, tmp_path, monkeypatch, capsys
):
    layout, _marker, _token = materials
    monkeypatch.setenv("COURSEHUB_MATERIAL_DIR", str(layout.root))
    books = tmp_path / "books"
    assert main(["book", "--books-dir", str(books), "build", LINKS]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "symbolic links pointing outside the book (passwd -> /etc/passwd)" in err
    assert read_state(BookPaths(books, LINKS))["state"] == "failed"
    assert main(["book", "--books-dir", str(books), "build", HONEST]) == 0
    assert BookPaths(books, HONEST).current.is_dir()


def test_a_hostile_book_built_from_the_course_page_gets_nothing_and_says_what_was_left_out(
    materials, database_url, tmp_path
):
    layout, marker, token = materials
    seed_web_catalog(database_url)
    paths = BookPaths(tmp_path / "books", WEB_COURSE)
    app = make_test_app(
        database_url,
        BOOKS_DIR=str(paths.root),
        MATERIAL_DIR=str(layout.root),
        WTF_CSRF_ENABLED=False,
    )
    try:
        client = app.test_client()
        team = identity_headers(IDENTITIES["grader"])
        assert client.post(f"/courses/{WEB_COURSE}/book/build", headers=team).status_code == 302
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and (
            is_building(paths) or read_state(paths)["state"] in ("queued", "building")
        ):
            time.sleep(0.2)
        assert read_state(paths)["state"] == "built", paths.state.read_text()
        assert not marker.exists()
        page = client.get(f"/courses/{WEB_COURSE}/", headers=team).get_data(as_text=True)
        assert "sphinx.config.html_extra_path" in page and "material commit" in page
        student = identity_headers(IDENTITIES["student"])
        for path in ("credentials", f"credentials/{WEB_COURSE}", "published"):
            answer = client.get(f"/courses/{WEB_COURSE}/book/{path}", headers=student)
            assert answer.status_code == 404 and token not in answer.get_data(as_text=True)
    finally:
        dispose_app(app)


PROBE = """
import json, os, socket
seen = {"uid": os.getuid()}
for name, path in (("material", MATERIAL), ("books", BOOKS)):
    try:
        seen[name] = sorted(os.listdir(path))
    except OSError as exc:
        seen[name] = type(exc).__name__
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    seen["network"] = "open"
except OSError as exc:
    seen["network"] = type(exc).__name__
seen["secrets"] = sorted(k for k in os.environ if "SECRET" in k or "TOKEN" in k)
print("SEEN" "=" + json.dumps(seen))
"""


def test_notebooks_a_host_admin_lets_run_run_in_the_sandbox(materials, tmp_path, monkeypatch):
    layout, _marker, _token = materials
    monkeypatch.setenv("COURSEHUB_MATERIAL_DIR", str(layout.root))
    monkeypatch.setenv("COURSEHUB_SECRET_KEY", "not-for-books")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "not-for-books-either")
    source = tmp_path / "src"
    paths = BookPaths(tmp_path / "books", "probe-2025")
    code = f"MATERIAL, BOOKS = {str(layout.root)!r}, {str(paths.root)!r}\n" + PROBE
    for name, text in book_files(code=code).items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    write_settings(paths, BookSettings(source_dir=str(source), execute=True, timeout_s=300))
    outcome = build_book(paths)
    assert outcome.ok, outcome.log_path.read_text()
    text = (paths.current / "notes.html").read_text()
    seen = json.loads(html.unescape(text).split("SEEN=", 1)[1].split("\n", 1)[0])
    if os.geteuid() == 0:
        assert seen["uid"] != 0  # the sandbox account
        # hidden (an empty folder of mode 000), or, under /tmp as here, not there at all
        # (the build's private /tmp)
        unseen = {"PermissionError", "FileNotFoundError"}
        assert seen["material"] in unseen and seen["books"] in unseen
    assert seen["network"] != "open"
    assert seen["secrets"] == []
    assert read_state(paths)["source_text"] == f"folder {source}"


def test_a_book_build_hides_every_courses_books_material_catalog_and_its_host_folder():
    from coursehub.books.sandboxjob import plan_build_hidden

    env = {
        "COURSEHUB_DATA_DIR": "/srv/ch/data",
        "COURSEHUB_SLOTS_DIR": "/srv/ch/slots",
        "COURSEHUB_GRADING_COURSES": "/srv/nbgrader/c",
        "COURSEHUB_GRADING_EXCHANGE": "/srv/nbgrader/x",
    }
    hidden = plan_build_hidden(
        env,
        books_dir=Path("/srv/ch/books"),
        material_dir=None,
        shared_root=Path("/srv/shared"),
        source_dir="/srv/book-source",
    )
    assert hidden == [
        "/srv/book-source",
        "/srv/ch/books",
        "/srv/ch/data",
        "/srv/ch/data/material",  # the material root's default: mirrors and credentials
        "/srv/ch/slots",
        "/srv/nbgrader/c",
        "/srv/nbgrader/x",
        "/srv/shared",
    ]
