"""A hostile student in an exam, as root with real accounts and processes: refused, still graded.

Two students' exam homes (:func:`coursehub.examroom.home.ensure_exam_home`,
real Unix accounts), a server of the second student listening on this host,
and the first student's exam kernel (:class:`coursehub.examroom.kernelmanager.ExamKernelManager`,
started by a process running as that student, as their exam server does).
In the kernel, shell escapes are refused with one line, ``socket`` reaches
neither an outside address nor the other student's server, the other
student's home cannot be read; the answer the student saves is snapshotted
(``coursehub exam snapshot``'s copy), submitted by the bell, collected and
autograded (nbgrader, in the grading sandbox) like any submission.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from coursehub.catalog.exams import create_exam, record_receipt, sitting_of, start_exam
from coursehub.catalog.examtime import Window
from coursehub.catalog.seed import seed_demo
from coursehub.examroom.guard import REFUSAL
from coursehub.examroom.home import ensure_exam_home, plan_exam_home, release_dir
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.examcollect import collect_exam
from coursehub.grading.examsnapshot import snapshot_exam
from coursehub.grading.examsubmit import submit_exam, verify_collected
from coursehub.grading.export import read_grade_table
from coursehub.sandbox.command import sandbox_mode
from test_exam_kernel import run_cells, student_python
from test_exam_submit import COURSE, EXAM, NB, released_exam
from test_grading_e2e import CORRECT, backend

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make the students' accounts"),
]

#: The kernel cell that saves the student's answer in the exam's notebook (standard library only).
SAVE_ANSWER = f"""
import json
path = {NB!r}
notebook = json.load(open(path))
for cell in notebook["cells"]:
    if cell["metadata"].get("nbgrader", {{}}).get("grade_id") == "energy":
        text = "".join(cell["source"])
        cell["source"] = text.replace(
            "    # YOUR CODE HERE\\n    raise NotImplementedError()", {CORRECT!r}
        )
json.dump(notebook, open(path, "w"))
print("saved")
"""


@pytest.fixture
def accounts() -> Iterator[list[pwd.struct_passwd]]:
    """Two fresh Unix accounts (``chtest-h...``), deleted afterwards."""
    names = [f"chtest-h{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for name in names:
        subprocess.run(["useradd", "--no-create-home", name], check=True)
    yield [pwd.getpwnam(name) for name in names]
    for name in names:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def exam_root() -> Iterator[Path]:
    """A site's exam folder that students may pass through (0711), removed afterwards.

    Under ``/srv``, as a site's is (the default, ``/srv/coursehub/exams``), not in
    ``/tmp``: an exam kernel's ``/tmp`` is its own, where nothing of another home is.
    """
    Path("/srv").mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="coursehub-exams-", dir="/srv"))
    os.chmod(root, 0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(
    sandbox_mode() not in ("root", "userns"), reason="no namespaces on this host (unshare fails)"
)
def test_a_hostile_student_is_refused_everything_and_the_exam_is_still_graded(
    session, tmp_path, accounts, exam_root
):
    layout = released_exam(tmp_path)
    course = seed_demo(session)
    now = datetime.now(UTC)
    window = Window(now - timedelta(hours=1), 60, now + timedelta(hours=2), "UTC")
    exam = create_exam(session, course, EXAM, window, "mbuffat")
    start_exam(session, course, exam, "p2500001", now - timedelta(minutes=30))
    release = release_dir(layout.exchange_root, COURSE, EXAM)
    homes = []
    for account in accounts:
        home = plan_exam_home(exam_root, COURSE, EXAM, account.pw_name)
        ensure_exam_home(home, account.pw_uid, account.pw_gid, release, COURSE, EXAM)
        homes.append(home)
    student = accounts[0]
    runtime = exam_root / "run"
    runtime.mkdir(mode=0o700)
    os.chown(runtime, student.pw_uid, student.pw_gid)
    server = socket.create_server(("127.0.0.1", 0))  # the other student's server
    port = server.getsockname()[1]
    other_nb = homes[1] / COURSE / EXAM / NB
    cells = [
        "!cat /etc/hostname",
        "%%sh\nid",
        "import subprocess; subprocess.check_output(['id'])",
        "import os; os.system('id')",
        "import os; os.posix_spawn('/bin/sh', ['sh'], {})",
        *[
            f"import socket; socket.create_connection({address!r}, timeout=3)"
            for address in (("1.1.1.1", 80), ("127.0.0.1", port))
        ],
        f"open({str(other_nb)!r}).read()",
        f"import os; os.listdir({str(homes[1])!r})",
        SAVE_ANSWER,
    ]
    python = student_python(student.pw_name)
    if python is None:
        pytest.skip("no interpreter with coursehub that a student can run in a user namespace")
    try:
        work = homes[0] / COURSE / EXAM
        results = run_cells(cells, runtime, work, user=student.pw_name, python=python)
    finally:
        server.close()
    escapes, sockets, reads, save = results[:5], results[5:7], results[7:9], results[9]
    for result in escapes:
        assert result["status"] == "error" and REFUSAL in result["text"], result
    for result in sockets:
        assert result["status"] == "error" and "OSError" in result["text"], result
        assert "Network is unreachable" in result["text"], result
    for result in reads:
        assert result["status"] == "error" and "PermissionError" in result["text"], result
    assert save == {"status": "ok", "text": "saved\n"}, save

    store = tmp_path / "store"
    snaps = snapshot_exam(exam_root / COURSE / EXAM, store)
    assert (
        CORRECT.splitlines()[0]
        in (store / student.pw_name / "latest" / COURSE / EXAM / NB).read_text()
    )
    sitting = sitting_of(session, course, exam, "p2500001")
    receipt = submit_exam(layout, EXAM, sitting, homes[0], datetime.now(UTC), "UTC", bell=True)
    assert receipt.files[NB] == snaps[student.pw_name].files[f"{COURSE}/{EXAM}/{NB}"]
    record_receipt(session, course, exam, "p2500001", receipt, final=True)
    collect_exam(layout, EXAM, {"p2500001": receipt.submission})
    assert verify_collected(layout, EXAM, "p2500001", receipt) == ""
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=180)
    [outcome] = autograde_assignment(layout, EXAM, ["p2500001"], limits, backend(tmp_path))
    assert outcome.status == "graded", outcome
    [row] = [row for row in read_grade_table(layout).rows if row.student_id == "p2500001"]
    assert row.cells[0].score == 4.0
