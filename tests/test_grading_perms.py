"""Grading files are private: modes at each step; two real Unix students cannot see each other.

The mode table follows one assignment through setup, release, submit,
collect, autograde and feedback. The two-student tests create Unix users
(``useradd``, removed afterwards) and act as them in a forked process
(``setgid``/``setuid``), so every read below is a real permission check.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from coursehub.errors import UsageError
from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    generate_feedback,
    release_assignment,
    release_feedback,
    skipped_submissions,
)
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import fetch_assignment, submit_assignment
from coursehub.grading.layout import (
    CourseLayout,
    ensure_course,
    layout_from_env,
    make_layout,
    secure_course,
)
from coursehub.grading.perms import LOCKED_FILES, plan_course_modes, resolve_grading_group

PS = "ps1"
NB = f"{DEMO_ASSIGNMENT}.ipynb"
HTML = f"{DEMO_ASSIGNMENT}.html"


# --- pure: the modes and the group ------------------------------------------------


@pytest.mark.parametrize(
    ("gid", "st_mode", "expected"),
    [
        (None, stat.S_IFDIR | 0o755, 0o700),
        (None, stat.S_IFREG | 0o644, 0o600),
        (None, stat.S_IFREG | 0o755, 0o700),
        (1234, stat.S_IFDIR | 0o777, 0o2770),
        (1234, stat.S_IFREG | 0o644, 0o660),
        (1234, stat.S_IFREG | 0o744, 0o770),
    ],
)
def test_course_entries_get_owner_only_or_team_group_modes(gid, st_mode, expected):
    assert plan_course_modes(gid).mode_of(st_mode) == expected


def test_grading_group_comes_from_the_setting_else_the_formgrade_group_if_it_exists():
    assert resolve_grading_group("c1", {}) is None  # no Unix group formgrade-c1 here
    assert resolve_grading_group("c1", {"COURSEHUB_GRADING_GROUP": "none"}) is None
    assert resolve_grading_group("c1", {"COURSEHUB_GRADING_GROUP": "root"}) == "root"
    with pytest.raises(UsageError, match="no Unix group 'team-c1'"):
        resolve_grading_group("c1", {"COURSEHUB_GRADING_GROUP": "team-{course_id}"})
    assert layout_from_env("c1", {"COURSEHUB_GRADING_GROUP": "root"}).grading_group == "root"


# --- helpers ------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def answer(layout: CourseLayout, student: str, home: Path, marker: str) -> Path:
    """Fetch as ``student`` into ``home``, write ``marker`` in the notebook, submit."""
    folder = fetch_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    notebook = nbformat.read(folder / NB, as_version=4)
    notebook.cells[0].source += f"\n{marker}"
    nbformat.write(notebook, folder / NB)
    submit_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    return folder


def released_course(root: Path, **options: Any) -> CourseLayout:
    layout = make_layout("phys-2025", root / "courses", root / "exchange", **options)
    ensure_course(layout)
    add_assignment(layout, PS, [demo_source_dir() / NB])
    generate_assignment(layout, PS)
    release_assignment(layout, PS)
    return layout


def autograde(layout: CourseLayout, student: str) -> None:
    """nbgrader's autograde of one submission, then the modes (as autograde_course_assignment)."""
    command = [
        sys.executable,
        "-m",
        "nbgrader",
        "autograde",
        PS,
        f"--student={student}",
        "--force",
        "--create",
    ]
    subprocess.run(command, cwd=layout.course_dir, check=True, capture_output=True)
    secure_course(layout)


def inbound_of(layout: CourseLayout, prefix: str) -> list[Path]:
    inbound = layout.exchange_root / layout.course_id / "inbound"
    return sorted(p for p in inbound.iterdir() if p.name.startswith(prefix))


def released_feedback(layout: CourseLayout) -> list[Path]:
    return sorted((layout.exchange_root / layout.course_id / "feedback").iterdir())


# --- one Unix user: the mode of every path at every step -------------------------------


@pytest.mark.slow
def test_every_grading_path_has_its_mode_after_each_step(tmp_path):
    layout = released_course(tmp_path, single_user=True)
    course, exchange = layout.course_dir, layout.exchange_root / layout.course_id
    expected = {
        course: 0o700,
        course / "gradebook.db": 0o600,
        course / "nbgrader_config.py": 0o600,
        course / "nbgrader_config.json": 0o600,
        course / "source" / PS / NB: 0o600,
        course / "release" / PS: 0o700,
        course / "release" / PS / NB: 0o600,
        layout.exchange_root: 0o1777,
        exchange: 0o755,
        exchange / "inbound": 0o3733,
        exchange / "outbound" / PS / NB: 0o644,
        exchange / "feedback": 0o711,
        exchange / "fetched": 0o1733,
    }
    assert {p: mode(p) for p in expected} == expected, "after setup and release"

    answer(layout, "alice", tmp_path / "home", "ALICE")
    [submission] = inbound_of(layout, "alice+")
    after_submit = {submission: 0o770, submission / NB: 0o640}
    assert {p: mode(p) for p in after_submit} == after_submit

    collect(layout, PS)
    autograde(layout, "alice")
    generate_feedback(layout, PS)
    release_feedback(layout, PS)
    stages = {
        course / "submitted" / "alice": 0o700,
        course / "submitted" / "alice" / PS: 0o700,
        course / "submitted" / "alice" / PS / NB: 0o600,
        course / "autograded" / "alice" / PS / NB: 0o600,
        course / "feedback" / "alice" / PS / HTML: 0o600,
        course / "gradebook.db": 0o600,
    }
    assert {p: mode(p) for p in stages} == stages
    [feedback] = released_feedback(layout)
    assert mode(feedback) == 0o644  # no Unix account alice: nbgrader's unguessable name

    for path in (course / "gradebook.db", course / "submitted"):  # an old installation
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    ensure_course(layout)
    assert (mode(course / "gradebook.db"), mode(course / "submitted")) == (0o600, 0o700)


@pytest.mark.root
def test_course_directory_belongs_to_the_team_group_when_one_is_set(tmp_path):
    layout = make_layout("phys-2025", tmp_path / "c", tmp_path / "x", grading_group="root")
    ensure_course(layout)
    for path in (layout.course_dir, layout.gradebook_path, layout.config_path):
        assert path.stat().st_gid == 0
    modes = (mode(layout.course_dir), mode(layout.gradebook_path), mode(layout.config_path))
    assert modes == (0o3770, 0o660, 0o640)  # sticky: the team cannot replace the config


# --- two real Unix users ---------------------------------------------------------------


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path


def as_user(user: User, func: Callable[..., Any], *args: Any) -> str:
    """Run ``func(*args)`` as ``user`` in a forked process; return "ok: ..." or "ExcName: ...".

    Everything ``func`` needs must be imported already: after ``setuid`` the
    interpreter's own files (under ``/root``) may be out of reach.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            os.environ.pop("JUPYTERHUB_USER", None)
            os.environ["HOME"] = str(user.home)
            os.chdir(user.home)
            text = f"ok: {func(*args)!r}"
        except BaseException as exc:  # reported to the parent
            text = f"{type(exc).__name__}: {exc}"
        os.write(write, text.encode()[:60000])
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def make_user(base: Path) -> Iterator[User]:
    name = f"chtest{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--user-group", name], check=True)
    try:
        entry = pwd.getpwnam(name)
        home = base / "home" / name
        home.mkdir(parents=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        os.chmod(home, 0o700)
        yield User(name, entry.pw_uid, entry.pw_gid, home)
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A folder every user can traverse (pytest's tmp_path is 0o700, root's)."""
    root = Path(tempfile.mkdtemp(prefix="chtest-grading-", dir="/tmp"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def alice(shared_root):
    yield from make_user(shared_root)


@pytest.fixture
def bob(shared_root):
    yield from make_user(shared_root)


def denied(result: str) -> bool:
    return result.startswith("PermissionError")


def plant(folder: Path) -> None:
    (folder / "planted").write_text("by another student")


def replace_by_link(notebook: Path, target: Path) -> None:
    notebook.unlink()
    notebook.symlink_to(target)


def cli(*argv: str) -> int:
    from coursehub.cli import main

    return main(list(argv))


def overwrite(path: Path) -> None:
    path.write_text("import os; os.system('id > /tmp/owned')\n")


def replace_file(path: Path) -> None:
    (path.parent / "planted.py").write_text("c = get_config()\n")
    os.replace(path.parent / "planted.py", path)


def append_to(path: Path) -> None:
    with path.open("ab") as handle:
        handle.write(b"-- a grade")


@pytest.mark.root
def test_the_team_writes_the_gradebook_but_can_neither_change_nor_replace_the_config(
    shared_root, alice
):
    """A team member (or the formgrader's account) in the course group vs nbgrader_config.py."""
    group = grp.getgrgid(alice.gid).gr_name
    layout = make_layout("phys-2025", shared_root / "c", shared_root / "x", grading_group=group)
    ensure_course(layout)
    os.chmod(shared_root / "c", 0o755)
    configs = [layout.course_dir / name for name in LOCKED_FILES]
    texts = [path.read_text() for path in configs]
    assert as_user(alice, append_to, layout.gradebook_path).startswith("ok")
    for path in configs:  # nbgrader_config.py and .json, which traitlets both load
        for attempt in (overwrite, replace_file, Path.unlink):
            assert denied(as_user(alice, attempt, path)), (attempt, path)
    assert [path.read_text() for path in configs] == texts == [texts[0], "{}\n"]
    assert as_user(alice, plant, layout.course_dir).startswith("ok")  # new files: allowed


@pytest.mark.root
@pytest.mark.slow
def test_a_student_cannot_read_another_students_submission_at_any_stage(
    shared_root, alice, bob, monkeypatch
):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(shared_root / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(shared_root / "exchange"))
    (shared_root / "courses").mkdir(mode=0o755)
    layout = released_course(shared_root)
    course = layout.course_dir

    # each student fetches and submits as themselves, in their own process
    assert as_user(alice, answer, layout, alice.name, alice.home, "ANSWER OF ALICE").startswith(
        "ok"
    )
    assert as_user(bob, answer, layout, bob.name, bob.home, "ANSWER OF BOB").startswith("ok")
    [inbound_alice] = inbound_of(layout, alice.name + "+")
    inbox = layout.exchange_root / layout.course_id / "inbound"
    assert as_user(alice, (inbound_alice / NB).read_text).startswith("ok")
    assert denied(as_user(bob, (inbound_alice / NB).read_text))
    assert denied(as_user(bob, os.listdir, inbox))

    # bob cannot submit as alice: refused by the command line, skipped by collect
    refused = as_user(
        bob,
        cli,
        "grading",
        "submit",
        layout.course_id,
        PS,
        "--student",
        alice.name,
        "--dir",
        str(bob.home),
    )
    assert refused == "ok: 2"
    assert as_user(
        bob, submit_assignment, layout.exchange_root, layout.course_id, PS, alice.name, bob.home
    ).startswith("ok")  # nbgrader --student
    log = collect(layout, PS)
    assert any("belongs to " + bob.name in s for s in skipped_submissions(log))
    collected = course / "submitted" / alice.name / PS / NB
    assert "ANSWER OF ALICE" in collected.read_text()

    # collected, graded, given feedback: nothing of alice's is open to bob
    autograde(layout, alice.name)
    autograde(layout, bob.name)
    generate_feedback(layout, PS)
    release_feedback(layout, PS)
    private = [
        collected,
        course / "autograded" / alice.name / PS / NB,
        course / "feedback" / alice.name / PS / HTML,
        course / "gradebook.db",
        course / "source" / PS / NB,
    ]
    for path in private:
        assert path.is_file(), path
        assert denied(as_user(bob, path.read_bytes)), path
    for folder in (course, course / "source", layout.exchange_root / layout.course_id / "feedback"):
        assert denied(as_user(bob, os.listdir, folder)), folder
    assert denied(as_user(bob, plant, collected.parent))
    owners = {p.stat().st_uid: p for p in released_feedback(layout)}
    assert set(owners) == {alice.uid, bob.uid}
    assert as_user(alice, owners[alice.uid].read_text).startswith("ok")
    assert denied(as_user(bob, owners[alice.uid].read_text))

    # bob swaps his own submission's notebook for a link to alice's collected one
    again = as_user(
        bob, submit_assignment, layout.exchange_root, layout.course_id, PS, bob.name, bob.home
    )
    assert again.startswith("ok"), again
    newest = inbound_of(layout, bob.name + "+")[-1]
    as_user(bob, replace_by_link, newest / NB, collected)
    log = collect(layout, PS)
    assert any("symbolic link" in s for s in skipped_submissions(log))
    assert "ANSWER OF ALICE" not in (course / "submitted" / bob.name / PS / NB).read_text()


# --- the catalog and the shared helpers ---------------------------------------------------


def test_the_sqlite_catalog_and_its_wal_files_are_owner_only_also_after_an_upgrade(tmp_path):
    from sqlalchemy import text

    from coursehub.catalog.db import make_engine

    path = tmp_path / "data" / "catalog.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (x INTEGER)"))
        connection.execute(text("INSERT INTO t VALUES (1)"))
        sides = [path.with_name(path.name + s) for s in ("-wal", "-shm")]
        assert all(p.exists() for p in sides)
        assert {p.name: mode(p) for p in (path, *sides)} == {p.name: 0o600 for p in (path, *sides)}
    engine.dispose()
    assert mode(path.parent) == 0o700
    for p in (path, *sides):  # what an older coursehub left
        if p.exists():
            os.chmod(p, 0o644)
    make_engine(f"sqlite:///{path}").dispose()
    assert all(mode(p) == 0o600 for p in (path, *sides) if p.exists())


def test_private_file_and_dir_helpers_create_correct_and_refuse_links(tmp_path):
    from coursehub.errors import CoursehubError
    from coursehub.filemodes import ensure_private_dir, ensure_private_file

    made = ensure_private_file(tmp_path / "secret.db")
    assert (made.read_bytes(), mode(made)) == (b"", 0o600)
    made.write_text("keep")
    os.chmod(made, 0o666)
    assert mode(ensure_private_file(made, 0o640)) == 0o640 and made.read_text() == "keep"
    folder = tmp_path / "a" / "b"
    assert mode(ensure_private_dir(folder)) == 0o700
    os.chmod(folder, 0o777)
    assert mode(ensure_private_dir(folder, 0o2770, gid=os.getegid())) == 0o2770
    (tmp_path / "link").symlink_to(made)
    with pytest.raises(CoursehubError, match="symbolic link"):
        ensure_private_file(tmp_path / "link")
