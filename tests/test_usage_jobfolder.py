"""Every runner job of a hub's servers reaches the jobs' usage folder.

The report: a hub run under ``umask 077`` made its runtime directory
``/run/coursehub`` mode 0700; the jobs' folder ``/run/coursehub/usage-jobs``
(1733) inside it was out of the students' reach, and each job printed
"cannot write usage to /run/coursehub/usage-jobs: Permission denied" and lost
its usage. Here a real unprivileged account appends a record there, as a
runner job in its server does.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coursehub.meter.sampler import JOB_FOLDER_MODE, ensure_job_folder, job_folder

#: A runner job's write as its user: the open of coursehub.meter.journal.append_record
#: (the test interpreter lives under /root, out of the student's reach: the system's python3).
WRITE = """
import os, sys
flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
fd = os.open(os.path.join(sys.argv[1], "job-2026-12-03.jsonl"), flags, 0o600)
os.write(fd, b'{"unit_id": "job:host:1"}\\n')
"""
#: The system's interpreter, which any account may run.
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture
def student() -> Iterator[pwd.struct_passwd]:
    """A throwaway Unix account (useradd), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root (useradd, another user's write)")
    name = f"chjf{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--no-create-home", "--user-group", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A hub runtime directory made under ``umask 077`` (0700), in a folder users reach."""
    base = Path(tempfile.mkdtemp(prefix="coursehub-jobfolder-", dir="/tmp"))
    os.chmod(base, 0o755)
    run = base / "run"
    run.mkdir(mode=0o700)
    os.chmod(run, 0o700)
    try:
        yield run
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_students_job_writes_its_usage_under_a_0700_runtime_dir(
    runtime_dir: Path, student: pwd.struct_passwd
) -> None:
    jobs = ensure_job_folder(job_folder(runtime_dir / "usage"))
    assert jobs.stat().st_mode & 0o7777 == JOB_FOLDER_MODE
    assert runtime_dir.stat().st_mode & 0o777 == 0o711  # reached, never listed

    def as_student() -> None:
        os.setgid(student.pw_gid)
        os.setuid(student.pw_uid)

    done = subprocess.run(
        [SYSTEM_PYTHON, "-c", WRITE, str(jobs)],
        preexec_fn=as_student,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (written,) = os.scandir(jobs)
    assert os.stat(written.path).st_uid == student.pw_uid
    assert '"unit_id": "job:host:1"' in Path(written.path).read_text()


def test_an_ancestor_of_someone_else_that_keeps_users_out_is_named(
    runtime_dir: Path, student: pwd.struct_passwd
) -> None:
    os.chown(runtime_dir, student.pw_uid, student.pw_gid)  # not the hub's: left as it is
    with pytest.raises(PermissionError) as caught:
        ensure_job_folder(job_folder(runtime_dir / "usage"))
    assert f"{runtime_dir} is mode 0700" in str(caught.value)
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700
