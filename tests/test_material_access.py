"""Published material is read by its course's team and students only (Unix groups, POSIX ACLs).

Real Unix accounts and groups: a student of course A clones A's published
material through the students' gitconfig (``safe.directory``), a student of
course B is refused; before the course's groups exist everyone reads it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from coursehub.coursedata.folders import ensure_group, unix_group_name
from coursehub.material.access import (
    describe_access,
    plan_published_access,
    render_published_acl,
)
from coursehub.material.credential import parse_credential, store_credential
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirror import update_mirror
from coursehub.material.mirrortypes import MirrorSource
from coursehub.spawn.material import plan_material_env
from material_gitserver import allow_loopback, serve_git, teacher_repo


@pytest.mark.parametrize(
    ("existing", "groups", "shared"),
    [
        ({"cht-a-2025", "chs-a-2025"}, ("cht-a-2025", "chs-a-2025"), "0640"),
        ({"cht-a-2025"}, ("cht-a-2025",), "0640"),
        (set(), (), "0644"),
    ],
)
def test_the_published_material_is_shared_with_the_course_groups_that_exist(
    existing, groups, shared
):
    access = plan_published_access("a-2025", existing.__contains__)
    assert (access.groups, access.shared_repository) == (groups, shared)


def test_without_groups_the_material_says_everyone_reads_it():
    text = describe_access(plan_published_access("a-2025", lambda _: False))
    assert "every account of the host" in text and "coursehub data ensure" in text


def test_a_course_id_that_cannot_name_a_group_falls_back_to_everyone():
    assert plan_published_access("Not_A_Course", lambda _: True).groups == ()


def test_the_acl_gives_the_groups_read_and_others_nothing():
    acl = render_published_acl(("cht-a", "chs-a"))
    assert acl == "u::rwX,g::---,g:cht-a:r-X,g:chs-a:r-X,m::r-X,o::---"
    assert render_published_acl(("cht-a",), default=True).endswith("g:cht-a:r-x,m::r-x,o::---")


def run_as(user: str, argv: list[str], env: dict[str, str], cwd: Path):
    """Run ``argv`` as ``user`` with the user's groups (runuser: initgroups) and only ``env``."""
    assignments = [f"{k}={v}" for k, v in env.items()]
    command = ["runuser", "-u", user, "--", "env", "-i", *assignments, *argv]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def hosts():
    """Two courses with a student account each, in the course's students group."""
    if os.geteuid() != 0 or shutil.which("setfacl") is None:
        pytest.skip("needs root (useradd, groupadd) and setfacl")
    tag = uuid.uuid4().hex[:6]
    courses = {side: f"chtest{side}{tag}-2025" for side in ("a", "b")}
    users = {side: f"chtest{side}{tag}" for side in ("a", "b")}
    homes = {}
    groups = []
    try:
        for side in ("a", "b"):
            home = Path(tempfile.mkdtemp(prefix="chstudent-", dir="/tmp"))
            useradd = ["useradd", "--no-create-home", "-d", str(home), users[side]]
            subprocess.run(useradd, check=True)
            shutil.chown(home, users[side])
            homes[side] = home
            team, students = (unix_group_name(courses[side], r) for r in ("team", "students"))
            groups += [team, students]
            ensure_group(team, [], courses[side])
            ensure_group(students, [users[side]], courses[side])
        yield courses, users, homes
    finally:
        for user in users.values():
            subprocess.run(["userdel", user], check=False, capture_output=True)
        for group in groups:
            subprocess.run(["groupdel", group], check=False, capture_output=True)
        for home in homes.values():
            shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(autouse=True)
def loopback_git_server():
    """The site allows the tests' git server on 127.0.0.1 (COURSEHUB_MATERIAL_HOSTS)."""
    with allow_loopback():
        yield


@pytest.fixture
def layout():
    root = Path(tempfile.mkdtemp(prefix="chmat-", dir="/tmp"))
    os.chmod(root, 0o755)
    yield MaterialLayout(root / "material")
    shutil.rmtree(root, ignore_errors=True)


def publish(layout: MaterialLayout, server: Path, base: str, token: str, course_id: str) -> None:
    teacher_repo(server, course_id, {f"notebooks/{course_id}.py": "print(1)\n"})
    store_credential(layout.ensure(), course_id, parse_credential(f"deploy:{token}".encode(), "t"))
    source = MirrorSource(course_id, f"{base}/{course_id}.git", "main", "notebooks", "token")
    update_mirror(layout, source)


def clone(layout: MaterialLayout, user: str, home: Path, course_id: str):
    materials = {course_id: {"repo": layout.pull_url(course_id), "branch": "main", "target": "x"}}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), **plan_material_env(materials)}
    target = home / f"clone-{course_id}"
    argv = ["git", "clone", "--quiet", layout.pull_url(course_id), str(target)]
    return run_as(user, argv, env, home), target


@pytest.mark.root
def test_a_student_clones_their_courses_material_and_not_another_courses(hosts, layout, tmp_path):
    courses, users, homes = hosts
    token = secrets.token_hex(8)
    server = tmp_path / "server"
    server.mkdir()
    with serve_git(server, "deploy", token) as base:
        publish(layout, server, base, token, courses["a"])
        publish(layout, server, base, token, courses["b"])
    a, b = courses["a"], courses["b"]

    done, target = clone(layout, users["a"], homes["a"], a)
    assert done.returncode == 0, done.stderr
    assert (target / f"{a}.py").read_text() == "print(1)\n"

    refused, _ = clone(layout, users["b"], homes["b"], a)
    assert refused.returncode != 0
    assert "Permission denied" in refused.stderr or "does not appear" in refused.stderr
    listing = run_as(users["b"], ["ls", str(layout.published_repo(a))], {}, homes["b"])
    assert listing.returncode != 0

    done, _ = clone(layout, users["b"], homes["b"], b)
    assert done.returncode == 0, done.stderr


@pytest.mark.root
def test_files_of_a_later_update_keep_the_courses_groups(hosts, layout, tmp_path):
    courses, users, homes = hosts
    a = courses["a"]
    token = secrets.token_hex(8)
    server = tmp_path / "server"
    server.mkdir()
    with serve_git(server, "deploy", token) as base:
        publish(layout, server, base, token, a)
        from material_gitserver import commit_files

        commit_files(server / f"{a}-work", {"notebooks/tp2.py": "print(2)\n"}, "tp2")
        subprocess.run(["git", "push", "--quiet", "origin", "main"], cwd=server / f"{a}-work")
        source = MirrorSource(a, f"{base}/{a}.git", "main", "notebooks", "token")
        assert update_mirror(layout, source).changed
    repo = layout.published_repo(a)
    files = [p for p in repo.rglob("*") if p.is_file()]
    assert all(p.stat().st_mode & 0o007 == 0 for p in files)  # others: nothing
    acl = subprocess.run(["getfacl", "-p", str(files[-1])], capture_output=True, text=True)
    assert f"group:{unix_group_name(a, 'students')}:r" in acl.stdout
    done, target = clone(layout, users["a"], homes["a"], a)
    assert done.returncode == 0, done.stderr
    assert (target / "tp2.py").exists()


@pytest.mark.root
def test_before_the_groups_exist_every_account_reads_the_material(layout, tmp_path):
    if shutil.which("setfacl") is None:
        pytest.skip("needs setfacl")
    course_id = f"chtestnone{uuid.uuid4().hex[:6]}-2025"
    token = secrets.token_hex(8)
    server = tmp_path / "server"
    server.mkdir()
    with serve_git(server, "deploy", token) as base:
        publish(layout, server, base, token, course_id)
    repo = layout.published_repo(course_id)
    assert repo.stat().st_mode & 0o777 == 0o755
    files = [p for p in repo.rglob("*") if p.is_file()]
    assert files and all(p.stat().st_mode & 0o004 for p in files)  # others read (objects 0444)
    assert layout.gitconfig.stat().st_mode & 0o777 == 0o644
