"""Every sandboxed job's own ``/tmp``, ``/var/tmp`` and ``/dev/shm``, even with its files there.

A job (a student's kernel, a book or environment build) must find nothing
another job left in a folder every account may write in, and leave nothing
there for the next one. Its own folder, its interpreter and the folders it
needs may lie under ``/tmp`` themselves (a clone in ``/tmp``, a job folder in
``/tmp/coursehub-grading``): they are shown again at their own paths in the
private folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from coursehub.sandbox.account import ensure_sandbox_account
from coursehub.sandbox.command import plan_sandbox_command, sandbox_mode
from coursehub.sandbox.folders import plan_private
from coursehub.sandbox.plan import PRIVATE_TARGETS, make_plan


def test_folders_under_a_private_target_are_shown_again_and_only_the_jobs_own_writable(tmp_path):
    target = tmp_path / "tmp"
    venv, job, other = target / "clone" / ".venv", target / "job-1", tmp_path / "srv"
    for folder in (venv / "lib", job / "work", other):
        folder.mkdir(parents=True)
    [exposure] = plan_private(
        [("/f/private-tmp", str(target))], [venv, venv / "lib", job, other], writable=[job]
    )
    assert exposure.cover == str(target) and exposure.source == "/f/private-tmp"
    assert exposure.paths == (str(venv), str(job))  # the nested lib with its venv; srv is outside
    assert exposure.writable == (str(job),)


def test_a_target_that_is_a_shown_folder_or_inside_one_or_missing_is_left_shared(tmp_path):
    (tmp_path / "a" / "tmp").mkdir(parents=True)
    assert plan_private([("/f/t", str(tmp_path / "a"))], [tmp_path / "a"]) == []
    assert plan_private([("/f/t", str(tmp_path / "a" / "tmp"))], [tmp_path / "a"]) == []
    assert plan_private([("/f/t", str(tmp_path / "missing"))], []) == []


def test_a_plan_without_a_private_folder_keeps_the_shared_ones(tmp_path):
    plan = make_plan(mode="userns", stage_dir=tmp_path / "stage")
    assert not any(e.source for e in plan.exposures)


#: Writes this run's file in every shared folder, says which it found, and writes in its folder.
PROBE = """\
import pathlib, sys
token, job, secret = sys.argv[1:4]
found = [f for f in ('/tmp', '/var/tmp', '/dev/shm') if pathlib.Path(f, token).exists()]
for folder in ('/tmp', '/var/tmp', '/dev/shm'):
    pathlib.Path(folder, token).write_text('x')
pathlib.Path(job, 'work', 'out.txt').write_text('ok')
print(found, pathlib.Path(secret).exists(), sys.prefix)
"""


@pytest.fixture
def venv_under_tmp():
    """A virtualenv in a 0700 folder of ``/tmp``, as a clone under ``/tmp`` has one."""
    top = Path(tempfile.mkdtemp(prefix="chtest-private-", dir="/tmp"))
    top.chmod(0o700)
    venv = top / "clone" / ".venv"
    (top / "clone").mkdir(mode=0o755)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    yield venv
    subprocess.run(["rm", "-rf", str(top)])


@pytest.mark.root
def test_two_jobs_share_nothing_in_tmp_and_their_own_folders_under_tmp_still_work(
    sandbox_user, venv_under_tmp
):
    if sandbox_mode() != "root":
        pytest.skip("this host cannot make mount namespaces")
    account = ensure_sandbox_account(sandbox_user)
    token = f"chtest-{uuid.uuid4().hex[:12]}"
    secret = Path("/tmp") / f"{token}-host.txt"  # a file of the host's /tmp: out of sight
    secret.write_text("the host's")
    outputs = []
    try:
        for _ in range(2):
            job = Path(tempfile.mkdtemp(prefix="chtest-job-", dir="/tmp"))
            (job / "work").mkdir()
            os.chown(job, account.uid, account.gid)
            os.chown(job / "work", account.uid, account.gid)
            plan = make_plan(
                needed=[venv_under_tmp],
                keep=[job],
                stage_dir=job / "stage",
                account_name=account.name,
                private_dir=job,
            )
            assert sorted(e.cover for e in plan.exposures if e.source) == sorted(
                t for _n, t in PRIVATE_TARGETS if Path(t).is_dir()
            )
            python = str(venv_under_tmp / "bin" / "python")
            done = subprocess.run(
                plan_sandbox_command([python, "-c", PROBE, token, str(job), str(secret)], plan),
                capture_output=True,
                text=True,
                timeout=60,
                cwd=job / "work",
            )
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout.split())
            assert (job / "work" / "out.txt").read_text() == "ok"
            assert (job / "private-tmp" / token).exists()  # written in its own /tmp
            subprocess.run(["rm", "-rf", str(job)], check=True)
    finally:
        secret.unlink()
    # neither found the other's files nor the host's; each ran its interpreter under /tmp
    assert outputs == [["[]", "False", str(venv_under_tmp)]] * 2
    assert not [f for f in ("/tmp", "/var/tmp", "/dev/shm") if Path(f, token).exists()]
