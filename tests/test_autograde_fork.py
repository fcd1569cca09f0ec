"""Kernels forked from a grading worker's fork server: fresh, sandboxed, and graded as before.

The fork server (:mod:`coursehub.grading.sandbox.forkserver`) imports numpy
and torch once; each submission's kernel is forked from it. A submission
must find nothing another one left: a file in ``/tmp`` or ``/dev/shm``, an
attribute of a preloaded module or of another one, a global variable, a
process left running.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from coursehub.errors import UsageError
from coursehub.grading.assignments import collect
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits, job_log_path
from coursehub.grading.sandbox.forkclient import FORK_VAR, fork_wanted
from coursehub.grading.sandbox.kernel import forkable
from test_autograde_worker import backend, outcomes_by, printed, worker_logs
from test_grading_e2e import CORRECT, PS, answer, new_course

#: A name of this run's own: a file another run left on the host does not count.
TOKEN = f"planted-{uuid.uuid4().hex[:12]}.txt"
#: Every folder the sandbox account may write in on a host.
SHARED = ("/tmp", "/var/tmp", "/dev/shm")
#: The first submission plants what the next one must not find.
PLANT = f"""\
import json, os, pathlib, subprocess
import numpy
for folder in {SHARED!r}:
    pathlib.Path(folder, {TOKEN!r}).write_text('x')
numpy.PLANTED = 1
json.PLANTED = 1
globals()['PLANTED_VAR'] = 1
subprocess.Popen(['sleep', '600'], start_new_session=True)
print('PLANTED', os.getpid())
"""
#: The next one looks for it (and says whether torch was there before it imported it).
LOOK = f"""\
import json, os, pathlib, sys
preloaded = 'torch' in sys.modules
import numpy
sleepers = []
for entry in os.listdir('/proc'):
    try:
        if entry.isdigit() and b'sleep' in open('/proc/%s/cmdline' % entry, 'rb').read():
            sleepers.append(entry)
    except OSError:
        pass
found = {{
    'files': [f for f in {SHARED!r} if pathlib.Path(f, {TOKEN!r}).exists()],
    'numpy': hasattr(numpy, 'PLANTED'),
    'module': hasattr(json, 'PLANTED'),
    'variable': 'PLANTED_VAR' in globals(),
    'sleepers': sleepers,
    'preloaded': preloaded,
}}
print('FOUND' + json.dumps(found, sort_keys=True))
"""


def test_the_setting_reads_true_and_false_and_refuses_the_rest():
    assert fork_wanted({}) is True
    assert fork_wanted({FORK_VAR: "false"}) is False
    assert fork_wanted({FORK_VAR: " Yes "}) is True
    with pytest.raises(UsageError):
        fork_wanted({FORK_VAR: "maybe"})


def test_only_this_interpreters_ipykernel_is_forked():
    assert forkable([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"])
    assert not forkable(["/usr/bin/R", "--slave", "-e", "IRkernel::main()"])
    assert not forkable([sys.executable, "-m", "other_kernel", "-f", "k.json"])


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("forked", [True, False], ids=["forked", "new-interpreter"])
def test_a_kernel_finds_nothing_the_previous_submission_left(
    sandbox_user, tmp_path, monkeypatch, forked
):
    monkeypatch.setenv(FORK_VAR, str(forked).lower())
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=60)
    answer(layout, tmp_path, "f1", textwrap.indent(PLANT, "    ") + CORRECT)
    answer(layout, tmp_path, "f2", textwrap.indent(LOOK, "    ") + CORRECT)
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=120)
    outcomes = autograde_assignment(
        layout, PS, ["f1", "f2"], limits, backend(tmp_path, 1), worker=True, parallel=1
    )
    assert outcomes_by(outcomes) == {"f1": ("graded", 4.0), "f2": ("graded", 4.0)}
    assert worker_logs(layout) == ["autograde-worker0.log"]  # one worker graded both
    for student in ("f1", "f2"):
        assert ("forked" in job_log_path(layout, PS, student).read_text()) is forked
    assert "PLANTED" in printed(layout, "f1")
    text = printed(layout, "f2")
    found = json.loads(text.split("FOUND", 1)[1].splitlines()[0])
    assert found == {
        "files": [],
        "module": False,
        "numpy": False,
        "preloaded": forked,
        "sleepers": [],
        "variable": False,
    }
    left = subprocess.run(["pgrep", "-u", sandbox_user, "-f", "sleep 600"], capture_output=True)
    assert left.stdout == b""
    assert not [f for f in SHARED if Path(f, TOKEN).exists()]  # nor on the host


def test_a_server_that_cannot_start_is_not_tried_again_for_the_same_course(monkeypatch):
    from coursehub.errors import CoursehubError
    from coursehub.grading.sandbox import forkclient

    tries = []

    def refuse(*args):
        tries.append(args)
        raise CoursehubError("the kernel fork server did not start: 2 threads")

    monkeypatch.setattr(forkclient, "ForkServer", refuse)
    monkeypatch.setattr(forkclient, "_FAILED", {})
    for _ in range(2):
        with pytest.raises(CoursehubError, match="2 threads"):
            forkclient.fork_server(["/srv/courses"], "grader", "userns")
    assert len(tries) == 1
    with pytest.raises(CoursehubError):
        forkclient.fork_server(["/srv/other"], "grader", "userns")
    assert len(tries) == 2


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own autoflush
def test_the_formgraders_one_submission_autograde_forks_its_kernel_and_scores_as_before(
    sandbox_user, tmp_path, monkeypatch
):
    from nbgrader.apps.api import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    from coursehub.grading.autograde.gradebook import ensure_students, read_score
    from coursehub.grading.sandbox import forkclient, kernel

    monkeypatch.setenv(FORK_VAR, "true")
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=60)
    answer(layout, tmp_path, "alice", CORRECT)
    answer(layout, tmp_path, "bob", "    return 0.0 * theta1")
    collect(layout, PS)
    ensure_students(layout, ["alice", "bob"])
    monkeypatch.chdir(layout.course_dir)  # the formgrader runs in the course directory
    config = PyFileConfigLoader("nbgrader_config.py", str(layout.course_dir)).load_config()

    logs: list[str] = []

    def grade_each() -> dict[str, tuple[float, float]]:
        for student in ("alice", "bob"):
            result = NbGraderAPI(config=config).autograde(PS, student, create=False)
            assert result["success"], result
            logs.append(result["log"])
        return {s: read_score(layout, PS, s) for s in ("alice", "bob")}

    monkeypatch.setattr(kernel, "_LONG_LIVED", [])
    plain = grade_each()  # a process that did not ask: a new interpreter per kernel
    assert not forkclient._SERVER
    assert all("sandboxed kernel (root) in" in log for log in logs)
    monkeypatch.setattr(kernel, "_LONG_LIVED", [True])  # as the formgrader's guard does
    try:
        forked = grade_each()
        assert forkclient._SERVER and forkclient._SERVER[0].alive()
        started = forkclient._SERVER[0].process.pid
        assert all("sandboxed kernel (root, forked) in" in log for log in logs[2:])
        grade_each()  # the next press reuses the same server
        assert forkclient._SERVER[0].process.pid == started
    finally:
        forkclient.close_fork_server()
    assert forked == plain == {"alice": (4.0, 4.0), "bob": (0.0, 4.0)}
