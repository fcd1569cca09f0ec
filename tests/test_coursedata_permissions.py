"""The data folder with distinct real Unix users: the team writes, students read, others nothing."""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from coursehub.catalog.courses import create_course, create_portal, create_year
from coursehub.catalog.members import add_member, remove_member
from coursehub.coursedata.ensure import ensure_data, render_outcomes
from coursehub.coursedata.folders import unix_group_name
from coursehub.errors import UsageError

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (useradd, groupadd)"),
    pytest.mark.skipif(
        shutil.which("setfacl") is None, reason="setfacl missing (apt-get install acl)"
    ),
]


@pytest.fixture
def users():
    """Three real Unix accounts: a teacher, a student, and someone in no course."""
    tag = uuid.uuid4().hex[:6]
    names = {role: f"chtest{tag}{role[0]}" for role in ("teacher", "student", "other")}
    for name in names.values():
        subprocess.run(["useradd", "--no-create-home", name], check=True)
    yield names
    for name in names.values():
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def shared_root():
    root = Path(f"/tmp/chtest-root-{uuid.uuid4().hex[:8]}")  # /tmp/pytest-of-root is 0700
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def course(session, users):
    year = create_year(session, "2025-2026")
    portal = create_portal(session, "TEST", "Tests")
    course = create_course(session, f"CHT{uuid.uuid4().hex[:6]}", "Data", year, portal)
    add_member(session, course, users["teacher"], "teacher")
    add_member(session, course, users["student"], "student")
    session.commit()
    yield course
    for role in ("team", "students"):
        subprocess.run(["groupdel", unix_group_name(course.course_id, role)], check=False)


def as_user(name: str, script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with ``sh`` as ``name`` (a new process: the account's current groups)."""
    return subprocess.run(
        ["runuser", "-u", name, "--", "sh", "-c", script], capture_output=True, text=True
    )


def test_the_team_writes_students_read_and_others_see_nothing(session, course, users, shared_root):
    (outcome,) = ensure_data(session, shared_root, [course.course_id])
    assert outcome.error == ""
    data = outcome.folder
    note = data / "notes.txt"
    # a teacher's strict umask does not hide the file from the students (default ACL)
    assert as_user(users["teacher"], f"umask 077; echo hello > {note}").returncode == 0
    assert as_user(users["student"], f"cat {note}").stdout == "hello\n"
    assert as_user(users["student"], f"echo x >> {note}").returncode != 0
    assert as_user(users["student"], f"touch {data}/mine.txt").returncode != 0
    assert as_user(users["other"], f"ls {data}").returncode != 0
    assert as_user(users["other"], f"cat {note}").returncode != 0


def test_ensure_is_idempotent_and_follows_the_roster(session, course, users, shared_root):
    ensure_data(session, shared_root, [course.course_id])
    (again,) = ensure_data(session, shared_root, [course.course_id])
    assert again.error == ""
    students = unix_group_name(course.course_id, "students")
    assert grp.getgrnam(students).gr_mem == [users["student"]]
    remove_member(session, course, users["student"])
    session.commit()
    ensure_data(session, shared_root, [course.course_id])
    assert grp.getgrnam(students).gr_mem == []
    assert as_user(users["student"], f"ls {again.folder}").returncode != 0


def test_an_unknown_course_and_a_missing_account_are_named(session, course, shared_root):
    with pytest.raises(UsageError, match="no course nope-2025"):
        ensure_data(session, shared_root, ["nope-2025"])
    add_member(session, course, "chtest-no-such-account", "student")
    session.commit()
    outcomes = ensure_data(session, shared_root, [course.course_id])
    assert "no Unix account for chtest-no-such-account" in render_outcomes(outcomes)
