"""Course books: the plans from tables, and real Jupyter Book builds from a course's git
material."""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from coursehub.books.background import build_if_asked
from coursehub.books.bookconfig import plan_config
from coursehub.books.build import build_book, served_build
from coursehub.books.plan import plan_build_id, plan_missing_pages, plan_prune, plan_view
from coursehub.books.settings import (
    BookError,
    BookPaths,
    BookSettings,
    parse_settings,
    read_state,
    write_settings,
)
from coursehub.cli import build_parser, main
from coursehub.errors import UsageError
from coursehub.material.credential import parse_credential, store_credential, stored_kind
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirror import update_mirror
from coursehub.material.mirrortypes import MirrorSource
from helpers import wait_until
from material_gitserver import allow_loopback, commit_files, git, serve_git, teacher_repo

COURSE = "books-2025"
CONFIG = 'title: A small book\nexecute:\n  execute_notebooks: "off"\n'
TOC = "format: jb-book\nroot: intro\nchapters:\n  - file: page2\n  - file: notes\n"


def notebook(source: str) -> str:
    """A one-cell notebook whose code is ``source``, with the stored output ``42``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", text="42\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("# Notes\n\nA notebook page."), cell]
    return nbformat.writes(nb)


def book_files(toc: str = TOC, code: str = "print(42)") -> dict[str, str]:
    return {
        "_config.yml": CONFIG,
        "_toc.yml": toc,
        "intro.md": "# Introduction\n\nThe first page.\n",
        "page2.md": "# Second page\n\nThe second page.\n",
        "notes.ipynb": notebook(code),
    }


@pytest.mark.parametrize(
    ("docnames", "files", "missing"),
    [
        (["intro", "notes"], {"intro.md", "notes.ipynb"}, []),
        (["intro", "ch/one"], {"intro.md", "ch/one.rst"}, []),
        (["intro.md", "two"], {"intro.md"}, ["two"]),
        (["intro", "notes"], {"intro.md", "notes.py"}, ["notes"]),
    ],
)
def test_a_table_of_contents_page_needs_a_file_with_a_page_suffix(docnames, files, missing):
    assert plan_missing_pages(docnames, files) == missing


@pytest.mark.parametrize(
    ("execute", "kernel", "mode", "aliases"),
    [
        (False, None, "off", None),
        (False, "course-x", "off", None),
        (True, None, "force", None),
        (True, "course-x", "force", {".*": "course-x"}),
    ],
)
def test_the_course_settings_decide_execution_whatever_the_book_says(
    execute, kernel, mode, aliases
):
    user = {
        "title": "T",
        "execute": {"execute_notebooks": "auto"},
        "sphinx": {"config": {"html_title": "T", "nb_execution_mode": "force"}},
    }
    config, _dropped = plan_config(user, execute=execute, kernel=kernel, cell_timeout_s=60)
    assert config["execute"]["execute_notebooks"] == mode
    assert config["execute"]["raise_on_error"] is True
    assert config["sphinx"]["config"].get("nb_kernel_rgx_aliases") == aliases
    assert "nb_execution_mode" not in config["sphinx"]["config"]  # myst-nb's own key, the book's
    assert user["execute"] == {"execute_notebooks": "auto"}  # the teacher's dict is not changed


def test_a_book_that_loads_python_from_its_repository_is_refused():
    with pytest.raises(BookError, match="local_extensions"):
        plan_config(
            {"sphinx": {"local_extensions": {"x": "."}}},
            execute=False,
            kernel=None,
            cell_timeout_s=1,
        )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "JSON object"),
        ({"colour": "red"}, "unknown book setting"),
        ({"public": "yes"}, "public must be a bool"),
        ({"folder": "../other"}, "inside the material"),
        ({"folder": "/etc"}, "inside the material"),
        ({"timeout_s": 0}, "positive"),
        ({"mem_limit": "lots"}, "mem_limit"),
    ],
)
def test_bad_book_settings_are_refused_with_what_is_wrong(data, message):
    with pytest.raises(UsageError, match=message):
        parse_settings(data, "settings.json")


def test_build_ids_are_stamps_made_unique_and_old_builds_are_pruned():
    now = datetime(2026, 12, 1, 10, 15, 0)
    assert plan_build_id(now, set()) == "20261201T101500"
    assert plan_build_id(now, {"20261201T101500"}) == "20261201T101500-2"
    assert plan_prune(["a", "b", "c", "d"], "c") == ["a", "b"]  # "c" served, "d" kept
    assert plan_prune(["a"], "a") == []


@pytest.mark.parametrize(
    ("state", "building", "alive", "shown"),
    [
        ("building", True, True, "building"),
        ("building", False, False, "interrupted"),
        ("queued", False, True, "queued"),
        ("failed", False, False, "failed"),
    ],
)
def test_a_build_whose_process_is_gone_shows_as_interrupted(state, building, alive, shown):
    assert plan_view({"state": state}, building, alive)["state"] == shown


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    """A course's git material (served over HTTP with a token) holding a small book."""
    root = tmp_path_factory.mktemp("books-git")
    token = "glpat-" + secrets.token_hex(16)
    (root / "server").mkdir()
    work = teacher_repo(root / "server", "book", book_files())
    layout = MaterialLayout(root / "material").ensure()
    store_credential(layout, COURSE, parse_credential(f"deploy:{token}".encode(), "test"))
    with allow_loopback(), serve_git(root / "server", "deploy", token) as base:

        def update() -> str:
            source = MirrorSource(
                COURSE, f"{base}/book.git", "main", "", stored_kind(layout, COURSE)
            )
            return update_mirror(layout, source, accept_rewrite=True).commit

        yield work, layout, update


@pytest.fixture(scope="module")
def built(material, tmp_path_factory):
    """The book built once from the material's first commit."""
    _work, layout, update = material
    commit = update()
    paths = BookPaths(tmp_path_factory.mktemp("books"), COURSE)
    outcome = build_book(paths, material_dir=layout.root)
    return paths, outcome, commit


def test_a_book_with_two_pages_and_a_notebook_is_built_from_the_course_material(built):
    paths, outcome, _commit = built
    assert outcome.ok, outcome.message + "\n" + outcome.log_path.read_text()
    html = paths.current
    assert "The first page." in (html / "intro.html").read_text()
    assert "The second page." in (html / "page2.html").read_text()
    assert "A notebook page." in (html / "notes.html").read_text()
    state = read_state(paths)
    assert state["state"] == "built" and state["error"] is None
    assert served_build(paths) == outcome.build_id
    assert not (paths.builds / outcome.build_id / "source").exists()


def test_the_material_commit_is_recorded_with_the_book(built):
    paths, outcome, commit = built
    published = read_state(paths)["commit"]
    assert outcome.commit == published and len(published) == 40
    assert commit  # the teacher's commit; the published one is coursehub's own history


def test_a_broken_table_of_contents_keeps_the_last_good_book(built, material):
    paths, first, _commit = built
    work, layout, update = material
    commit_files(work, {"_toc.yml": TOC + "  - file: missing_chapter\n"}, "break the toc")
    git("push", "--quiet", "origin", "main", cwd=work)
    update()
    outcome = build_book(paths, material_dir=layout.root)
    assert not outcome.ok
    assert (
        "missing_chapter" in outcome.message and "previous book is still served" in outcome.message
    )
    assert served_build(paths) == first.build_id
    assert "The first page." in (paths.current / "intro.html").read_text()
    state = read_state(paths)
    assert (state["state"], state["served_build"]) == ("failed", first.build_id)
    assert "missing_chapter" in outcome.log_path.read_text()


def test_a_material_update_rebuilds_the_book_only_when_the_course_asks_for_it(built, material):
    paths, _first, _commit = built
    work, layout, update = material
    commit_files(work, {"_toc.yml": TOC, "intro.md": "# Introduction\n\nRebuilt.\n"}, "fix")
    git("push", "--quiet", "origin", "main", cwd=work)
    commit = update()
    assert not build_if_asked(paths, True, material_dir=layout.root)  # the setting is off
    write_settings(paths, BookSettings(build_on_update=True))
    assert not build_if_asked(paths, False, material_dir=layout.root)  # no new commit
    assert build_if_asked(paths, True, material_dir=layout.root)
    wait_until(lambda: read_state(paths)["state"] in ("built", "failed"), timeout_s=240)
    state = read_state(paths)
    assert state["state"] == "built", state
    assert "Rebuilt." in (paths.current / "intro.html").read_text()
    assert commit


def test_the_material_comes_before_a_host_folder_and_each_build_says_which_source_it_used(
    built, material, tmp_path, capsys
):
    paths, _first, _commit = built
    _work, layout, _update = material
    folder = write_book(tmp_path / "old", {**book_files(), "intro.md": "# Old\n\nOld folder.\n"})
    write_settings(paths, BookSettings(source_dir=str(folder)))
    outcome = build_book(paths, material_dir=layout.root)
    assert outcome.ok, outcome.message
    intro = (paths.current / "intro.html").read_text()
    assert "Old folder." not in intro and "Introduction" in intro
    state = read_state(paths)
    assert (state["source"], state["source_text"]) == (
        "material",
        f"material commit {outcome.commit[:12]}",
    )
    assert main(["book", "--books-dir", str(paths.root), "show", COURSE]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["build"]["source_text"] == state["source_text"]
    assert shown["build"]["served_source"] == state["source_text"]
    write_settings(paths, BookSettings())


def test_material_update_on_the_command_line_is_carried_out_with_the_books():
    args = build_parser().parse_args(["material", "update", COURSE])
    assert args.func.__module__ == "coursehub.usecases.material_update"
    assert args.func.__qualname__ == "run"


def write_book(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_a_material_without_a_book_configuration_fails_in_the_cli_with_a_clear_message(
    tmp_path, capsys
):
    source = write_book(tmp_path / "src", {"README.md": "# no book here\n"})
    books = tmp_path / "books"
    assert (
        main(["book", "--books-dir", str(books), "settings", COURSE, "--source-dir", str(source)])
        == 0
    )
    assert main(["book", "--books-dir", str(books), "build", COURSE]) == 1
    err = capsys.readouterr().err
    assert "no Jupyter Book configuration" in err and "_config.yml" in err
    assert read_state(BookPaths(books, COURSE))["state"] == "failed"


def test_a_notebook_that_fails_to_execute_fails_the_build_when_the_course_executes(tmp_path):
    source = write_book(tmp_path / "src", book_files(code="raise ValueError('broken cell')"))
    paths = BookPaths(tmp_path / "books", COURSE)
    write_settings(paths, BookSettings(source_dir=str(source), execute=True, timeout_s=300))
    outcome = build_book(paths)
    assert not outcome.ok and "previous book is still served" in outcome.message
    assert "broken cell" in outcome.log_path.read_text()
    assert not paths.current.exists()


def test_a_build_over_its_time_is_stopped_with_a_clear_message(tmp_path):
    source = write_book(tmp_path / "src", book_files())
    paths = BookPaths(tmp_path / "books", COURSE)
    write_settings(paths, BookSettings(source_dir=str(source), timeout_s=1))
    outcome = build_book(paths)
    assert not outcome.ok
    assert "exceeded its time limit" in outcome.message
    assert json.loads(paths.state.read_text())["error"] == outcome.message


@pytest.mark.parametrize(
    ("extensions", "kept", "left_out"),
    [
        (None, ["colon_fence", "dollarmath", "linkify", "tasklist"], False),
        (["deflist", "substitution"], ["deflist"], True),
        (["dollarmath"], ["dollarmath"], False),
        ("substitution", ["colon_fence", "dollarmath", "linkify", "tasklist"], True),
    ],
)
def test_a_book_never_gets_myst_substitutions_which_run_jinja_at_build_time(
    extensions, kept, left_out
):
    from coursehub.books.bookconfig import plan_myst_extensions

    assert plan_myst_extensions(extensions) == (kept, left_out)
