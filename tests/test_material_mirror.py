"""A course's material from a private repository: mirror, students' pulls, bad inputs.

The private repository is served by ``git http-backend`` behind basic auth
(tests/material_gitserver.py); students pull the published mirror with
nbgitpuller's ``gitpuller`` command in a home of their own, with nothing but
the variables a student's server gets (:mod:`coursehub.spawn.material`).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from coursehub.catalog.courses import set_material
from coursehub.catalog.db import make_engine, session_factory
from coursehub.catalog.readmodel import load_course
from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.material.credential import parse_credential, store_credential
from coursehub.material.gitcmd import UNREADABLE
from coursehub.material.hosts import parse_host_policy
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirror import update_mirror
from coursehub.material.mirrortypes import MirrorSource
from coursehub.material.publish import published_head
from coursehub.material.service import run_update, set_course_material
from coursehub.spawn.material import plan_material_env
from coursehub.web.testing import seed_web_catalog
from material_gitserver import (
    allow_loopback,
    commit_files,
    git,
    serve_git,
    serve_recorder,
    teacher_repo,
)

COURSE = "mlmeca-2025"
FILES = {
    "notebooks/tp1.py": "print('tp1')\n",
    "notebooks/data.csv": "x\n1\n",
    "solutions/tp1.py": "ANSWER = 42\n",
}


@dataclass
class Repo:
    url: str
    token: str
    work: Path


@pytest.fixture
def private_repo(tmp_path: Path):
    root = tmp_path / "server"
    root.mkdir()
    work = teacher_repo(root, "mlmeca", FILES)
    token = "glpat-" + secrets.token_hex(16)
    with allow_loopback(), serve_git(root, "deploy", token) as base:
        yield Repo(f"{base}/mlmeca.git", token, work)


@pytest.fixture
def layout():
    """A material folder others may traverse (as /srv/coursehub/material would be)."""
    root = Path(tempfile.mkdtemp(prefix="chmat-", dir="/tmp"))
    os.chmod(root, 0o755)
    yield MaterialLayout(root / "material")
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def sessions(database_url: str):
    seed_web_catalog(database_url)
    engine = make_engine(database_url)
    yield session_factory(engine)
    engine.dispose()


def set_repo(sessions, layout, url, token=None, branch="main", subdir="notebooks"):
    credential = parse_credential(f"deploy:{token}".encode(), "test") if token else None
    with sessions() as session:
        course = load_course(session, COURSE)
        set_course_material(session, course, layout, url, branch, subdir, credential=credential)
        session.commit()


def material_of(sessions):
    with sessions() as session:
        return load_course(session, COURSE).material


def student_env(home: Path, layout: MaterialLayout) -> dict[str, str]:
    """What a student's server has for git: its own home, a PATH, the safe.directory entries."""
    materials = {COURSE: {"repo": layout.pull_url(COURSE), "branch": "main", "target": "x"}}
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), **plan_material_env(materials)}


def student_pull(home: Path, layout: MaterialLayout, user: str | None = None) -> Path:
    """Run nbgitpuller's ``gitpuller`` as the student (``user``) would in their server."""
    target = home / f"{COURSE}-material"
    python, env = sys.executable, student_env(home, layout)
    if user is not None:
        # the test's venv interpreter is a link into /root: the student runs the same
        # Python (same version and site-packages), as a shared install would be seen
        python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
        env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    done = subprocess.run(
        [python, "-m", "nbgitpuller.pull", layout.pull_url(COURSE), "main", str(target)],
        env=env,
        cwd=home,
        user=user,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def files_holding(folder: Path, needle: str) -> list[Path]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle.encode() in path.read_bytes():
                    found.append(path)
            except PermissionError:
                continue
    return found


def test_a_private_repository_is_mirrored_and_pulled_without_its_token(
    private_repo, layout, sessions, tmp_path
):
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    outcome = run_update(sessions, COURSE, layout)
    assert outcome.ok, outcome.message
    material = material_of(sessions)
    assert (material.state, material.error, material.credential) == ("ok", "", "token")
    assert material.commit == git("rev-parse", "HEAD", cwd=private_repo.work)
    home = tmp_path / "student"
    home.mkdir()
    target = student_pull(home, layout)
    assert sorted(p.name for p in target.iterdir() if p.name != ".git") == ["data.csv", "tp1.py"]
    assert not files_holding(home, "ANSWER = 42")  # the other folders never reach students
    assert not files_holding(home, private_repo.token)
    assert not files_holding(layout.published, private_repo.token)
    assert private_repo.token not in " ".join(student_env(home, layout).values())
    assert private_repo.url not in (target / ".git" / "config").read_text()
    assert oct(layout.credential(COURSE).stat().st_mode & 0o777) == "0o600"
    assert oct(layout.private.stat().st_mode & 0o777) == "0o700"


def test_a_students_edit_survives_a_teachers_update(private_repo, layout, sessions, tmp_path):
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert run_update(sessions, COURSE, layout).ok
    home = tmp_path / "student"
    home.mkdir()
    target = student_pull(home, layout)
    (target / "tp1.py").write_text("print('my answer')\n")
    commit_files(private_repo.work, {"notebooks/tp2.py": "print('tp2')\n"}, "tp2")
    git("push", "--quiet", "origin", "main", cwd=private_repo.work)
    assert run_update(sessions, COURSE, layout).ok
    student_pull(home, layout)
    assert (target / "tp1.py").read_text() == "print('my answer')\n"
    assert (target / "tp2.py").read_text() == "print('tp2')\n"


def test_a_wrong_token_is_named_and_the_last_good_material_is_still_served(
    private_repo, layout, sessions
):
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert run_update(sessions, COURSE, layout).ok
    served = published_head(layout, COURSE)
    set_repo(sessions, layout, private_repo.url, "glpat-wrongwrongwrong")
    outcome = run_update(sessions, COURSE, layout)
    assert not outcome.ok
    assert "refused the credential" in outcome.message
    assert "last good material is still served" in outcome.message
    assert "glpat-wrong" not in outcome.message
    material = material_of(sessions)
    assert material.state == "error" and material.error == outcome.message
    assert published_head(layout, COURSE) == served
    assert material.pull_url


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"token": None}, "or a private one: it needs a credential"),
        ({"branch": "nope"}, "branch nope does not exist"),
        ({"subdir": "missing"}, "folder 'missing' does not exist on branch main"),
        ({"url": "http://127.0.0.1:9/mlmeca.git"}, "could not be fetched (no answer, no git"),
    ],
)
def test_bad_inputs_are_explained_and_keep_the_last_good_material(
    private_repo, layout, sessions, change, expected
):
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert run_update(sessions, COURSE, layout).ok
    served = published_head(layout, COURSE)
    if change.get("token", "") is None:
        with sessions() as session:
            course = load_course(session, COURSE)
            set_course_material(
                session, course, layout, private_repo.url, subdir="notebooks", drop_credential=True
            )
            session.commit()
    else:
        set_repo(
            sessions,
            layout,
            change.get("url", private_repo.url),
            private_repo.token,
            change.get("branch", "main"),
            change.get("subdir", "notebooks"),
        )
    outcome = run_update(sessions, COURSE, layout)
    assert not outcome.ok
    assert expected in outcome.message
    assert published_head(layout, COURSE) == served


def test_a_force_push_keeps_the_last_good_mirror_until_accepted(
    private_repo, layout, sessions, tmp_path
):
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert run_update(sessions, COURSE, layout).ok
    served = published_head(layout, COURSE)
    home = tmp_path / "student"
    home.mkdir()
    target = student_pull(home, layout)
    (target / "notes.txt").write_text("mine\n")
    git("commit", "--quiet", "--amend", "-m", "rewritten", cwd=private_repo.work)
    commit_files(private_repo.work, {"notebooks/tp1.py": "print('tp1 v2')\n"}, "v2")
    git("push", "--quiet", "--force", "origin", "main", cwd=private_repo.work)
    outcome = run_update(sessions, COURSE, layout)
    assert not outcome.ok and "force-pushed" in outcome.message
    assert published_head(layout, COURSE) == served
    assert run_update(sessions, COURSE, layout, accept_rewrite=True).ok
    student_pull(home, layout)  # the students' history only grows: a plain merge
    assert (target / "tp1.py").read_text() == "print('tp1 v2')\n"
    assert (target / "notes.txt").read_text() == "mine\n"


def test_the_cli_sets_updates_and_shows_the_material(
    private_repo, layout, database_url, tmp_path, capsys
):
    seed_web_catalog(database_url)
    token_file = tmp_path / "token"
    token_file.write_text(f"deploy:{private_repo.token}\n")
    common = ["--database-url", database_url, "--material-dir", str(layout.root)]
    assert (
        main(
            [
                "material",
                "set",
                COURSE,
                "--repo",
                private_repo.url,
                "--subdir",
                "notebooks",
                "--credential",
                str(token_file),
                *common,
            ]
        )
        == 0
    )
    assert main(["material", "update", COURSE, *common]) == 0
    assert main(["material", "show", COURSE, *common]) == 0
    out = capsys.readouterr().out
    assert "state           ok" in out and "file://" in out
    assert private_repo.token not in out
    assert (
        main(["material", "set", COURSE, "--repo", private_repo.url, "--branch", "gone", *common])
        == 0
    )
    assert main(["material", "update", COURSE, *common]) == 2
    err = capsys.readouterr().err
    assert "coursehub: error: mlmeca-2025: branch gone does not exist" in err
    assert "Traceback" not in err


def test_the_cli_refuses_a_token_in_the_url(layout, database_url, capsys):
    seed_web_catalog(database_url)
    url = "https://deploy:glpat-secret123@gitlab.example.org/meca/mlmeca.git"
    status = main(
        [
            "material",
            "set",
            COURSE,
            "--repo",
            url,
            "--database-url",
            database_url,
            "--material-dir",
            str(layout.root),
        ]
    )
    assert status == 2
    assert "holds a user name or token" in capsys.readouterr().err


def test_a_stored_token_never_goes_to_another_host_the_course_is_pointed_at(
    private_repo, layout, sessions
):
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert run_update(sessions, COURSE, layout).ok
    with serve_recorder() as (other, seen):
        with pytest.raises(UsageError, match="give the credential again"):
            set_repo(sessions, layout, f"{other}/steal.git")  # the token is kept by default
        assert material_of(sessions).git_url == private_repo.url
        with sessions() as session:  # a way around the check (an older version, the database)
            set_material(session, load_course(session, COURSE), f"{other}/steal.git")
            session.commit()
        outcome = run_update(sessions, COURSE, layout)
        assert not outcome.ok and "was given for" in outcome.message
        assert seen == []  # not even asked
    assert layout.credential(COURSE).exists()  # the lead's token stays for its own host


def test_a_new_host_with_the_credential_given_again_or_dropped_is_accepted(
    private_repo, layout, sessions
):
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    with serve_recorder() as (other, seen):
        with sessions() as session:
            course = load_course(session, COURSE)
            set_course_material(session, course, layout, f"{other}/x.git", drop_credential=True)
            session.commit()
        assert material_of(sessions).credential == ""
        assert not layout.credential(COURSE).exists()
        outcome = run_update(sessions, COURSE, layout)
        assert not outcome.ok
        assert [r["authorization"] for r in seen] == [""] * len(seen)


def test_a_redirect_to_another_host_is_not_followed(layout, sessions):
    with serve_recorder() as (target, seen), allow_loopback():
        moved = [("Location", f"{target}/x.git/info/refs?service=git-upload-pack")]
        with serve_recorder("302 Found", moved) as (start, _):
            set_repo(sessions, layout, f"{start}/x.git", "glpat-redirected-token")
            outcome = run_update(sessions, COURSE, layout)
    assert not outcome.ok
    assert seen == []


def test_a_loopback_repository_is_refused_unless_the_site_allows_it(private_repo, layout, sessions):
    with allow_loopback(""), pytest.raises(UsageError) as refused:
        set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert "is not allowed on this site" in str(refused.value)
    assert "COURSEHUB_MATERIAL_HOSTS" in str(refused.value)
    assert material_of(sessions).git_url != private_repo.url


def test_the_host_is_checked_again_when_the_material_is_fetched(layout, sessions):
    with serve_recorder() as (other, seen):
        with allow_loopback():
            set_repo(sessions, layout, f"{other}/x.git")
        with allow_loopback(""):  # the site no longer allows it (or the name moved)
            outcome = run_update(sessions, COURSE, layout)
    assert not outcome.ok and "is not allowed on this site" in outcome.message
    assert seen == []


def test_git_connects_to_the_address_checked_not_to_what_the_name_resolves_to_later(
    private_repo, layout
):
    port = private_repo.url.split(":")[2].split("/")[0]
    url = f"http://git.example.test:{port}/mlmeca.git"  # a name no resolver here knows
    layout.ensure()
    store_credential(
        layout, COURSE, parse_credential(f"deploy:{private_repo.token}".encode(), "t"), url
    )
    source = MirrorSource(COURSE, url, "main", "notebooks", "token")
    checked = update_mirror(
        layout, source, hosts=parse_host_policy("127.0.0.1"), resolver=lambda h, p: ["127.0.0.1"]
    )
    assert checked.commit == git("rev-parse", "HEAD", cwd=private_repo.work)


def test_a_closed_port_and_a_web_server_that_is_not_git_read_the_same(layout, sessions):
    messages = set()
    with allow_loopback():
        for status in ("404 Not Found", "200 OK", "500 Internal Server Error", "401 No"):
            answer = [("Content-Type", "text/html"), ("WWW-Authenticate", 'Basic realm="x"')]
            with serve_recorder(status, answer, b"<html>") as (url, _):
                set_repo(sessions, layout, f"{url}/x.git")
                outcome = run_update(sessions, COURSE, layout)
                messages.add(outcome.message.replace(url, "URL"))
        set_repo(sessions, layout, "http://127.0.0.1:9/x.git")
        messages.add(
            run_update(sessions, COURSE, layout).message.replace("http://127.0.0.1:9", "URL")
        )
    assert messages == {
        UNREADABLE.format(url="URL/x.git") + "; the last good material is still served"
    }


def test_the_cli_asks_for_the_credential_again_for_another_host(
    private_repo, layout, database_url, tmp_path, capsys
):
    seed_web_catalog(database_url)
    token_file = tmp_path / "token"
    token_file.write_text(f"deploy:{private_repo.token}\n")
    common = ["--database-url", database_url, "--material-dir", str(layout.root)]
    setting = ["material", "set", COURSE, "--repo"]
    assert main([*setting, private_repo.url, "--credential", str(token_file), *common]) == 0
    other = "http://127.0.0.1:9/steal.git"
    assert main([*setting, other, *common]) == 2
    assert "give the credential again" in capsys.readouterr().err
    assert main([*setting, other, "--no-credential", *common]) == 0


DISK_MIB = 6


@pytest.fixture
def small_disk():
    """A material folder on a 6 MiB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    root = Path(tempfile.mkdtemp(prefix="chmat-full-", dir="/tmp"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MIB}m,mode=0755", "tmpfs", str(root)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        root.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield MaterialLayout(root / "material")
    subprocess.run(["umount", str(root)], check=False)
    shutil.rmtree(root, ignore_errors=True)


def garbage_of(layout: MaterialLayout) -> dict[str, str]:
    out = git("--git-dir", str(layout.upstream(COURSE)), "count-objects", "-v")
    return dict(line.split(": ", 1) for line in out.splitlines())


def update_past_the_disk(private_repo, layout: MaterialLayout, sessions):
    """Publish the material, push a file bigger than the disk, update again.

    Returns the published head of the first update and the second update's outcome.
    """
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert run_update(sessions, COURSE, layout).ok
    served = published_head(layout, COURSE)
    big = secrets.token_hex(DISK_MIB * 1024 * 1024)  # hex of random bytes: hardly compressible
    commit_files(private_repo.work, {"notebooks/big.txt": big}, "too big")
    git("push", "--quiet", "origin", "main", cwd=private_repo.work)
    return served, run_update(sessions, COURSE, layout)


@pytest.mark.root
def test_a_full_disk_during_an_update_leaves_no_partial_objects_and_the_next_update_works(
    private_repo, small_disk, sessions
):
    layout = small_disk
    served, outcome = update_past_the_disk(private_repo, layout, sessions)
    assert not outcome.ok and "last good material is still served" in outcome.message
    assert f"{layout.root} ran out of space" in outcome.message, outcome.message
    assert published_head(layout, COURSE) == served
    garbage = garbage_of(layout)
    assert (garbage["garbage"], garbage["size-garbage"]) == ("0", "0"), garbage
    assert not list((layout.upstream(COURSE) / "objects").glob("*/tmp_*"))
    # the teacher takes the big file out again (a rewritten branch): space is back
    git("reset", "--quiet", "--hard", "HEAD~1", cwd=private_repo.work)
    commit_files(private_repo.work, {"notebooks/tp2.py": "print('tp2')\n"}, "small")
    git("push", "--quiet", "--force", "origin", "main", cwd=private_repo.work)
    outcome = run_update(sessions, COURSE, layout, accept_rewrite=True)
    assert outcome.ok, outcome.message


@pytest.mark.root
def test_a_big_file_removed_again_but_kept_in_the_history_no_longer_blocks_the_updates(
    private_repo, small_disk, sessions
):
    """The teacher deletes the file in a new commit: their history still holds it."""
    layout = small_disk
    assert not update_past_the_disk(private_repo, layout, sessions)[1].ok
    git("rm", "--quiet", "notebooks/big.txt", cwd=private_repo.work)
    commit_files(private_repo.work, {"notebooks/tp2.py": "print('tp2')\n"}, "big file out")
    git("push", "--quiet", "origin", "main", cwd=private_repo.work)
    outcome = run_update(sessions, COURSE, layout)  # no --accept-rewrite: nothing was rewritten
    assert outcome.ok, outcome.message
    assert "its last commit only was fetched" in outcome.message
    head = git("rev-parse", "HEAD", cwd=private_repo.work).strip()
    published = layout.published_repo(COURSE)
    assert git("--git-dir", str(published), "show", "main:tp2.py").strip() == "print('tp2')"
    assert git("--git-dir", str(published), "fsck", "--no-progress") == ""
    assert head in git("--git-dir", str(published), "log", "-1", "--format=%B", "main")
    garbage = garbage_of(layout)
    assert (garbage["garbage"], garbage["size-garbage"]) == ("0", "0"), garbage
    # later updates on top of the shallow mirror check the history again, and fit
    commit_files(private_repo.work, {"notebooks/tp3.py": "print('tp3')\n"}, "tp3")
    git("push", "--quiet", "origin", "main", cwd=private_repo.work)
    outcome = run_update(sessions, COURSE, layout)
    assert outcome.ok and "last commit only" not in outcome.message, outcome.message


@pytest.fixture
def student_account():
    if os.geteuid() != 0:
        pytest.skip("needs root to create a Unix user")
    name = f"chtest{uuid.uuid4().hex[:8]}"
    home = Path(tempfile.mkdtemp(prefix="chstudent-", dir="/tmp"))
    subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), name], check=True)
    entry = pwd.getpwnam(name)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    os.chmod(home, 0o700)
    yield name, home
    subprocess.run(["userdel", name], check=False)
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.root
def test_a_student_account_pulls_and_finds_no_credential_anywhere_it_can_read(
    private_repo, layout, sessions, student_account
):
    name, home = student_account
    set_repo(sessions, layout, private_repo.url, private_repo.token)
    assert run_update(sessions, COURSE, layout).ok
    target = student_pull(home, layout, user=name)
    assert (target / "tp1.py").exists()
    search = subprocess.run(
        [
            "grep",
            "-rlF",
            "--",
            private_repo.token,
            str(layout.root),
            str(home),
            "/proc/self/environ",
        ],
        env=student_env(home, layout),
        user=name,
        capture_output=True,
        text=True,
    )
    assert search.stdout == ""  # nothing found (grep: 1 with "Permission denied" on private/)
    assert "Permission denied" in search.stderr
    refused = subprocess.run(
        ["cat", str(layout.credential(COURSE))], user=name, capture_output=True, text=True
    )
    assert refused.returncode != 0 and private_repo.token not in refused.stdout
