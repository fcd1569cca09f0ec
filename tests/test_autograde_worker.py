"""Grading workers for real: nbgrader imported once per slot, each student's kernel still fresh.

Same course and students as ``test_parallel_autograde_batch`` (the demo
assignment, real nbgrader, the sandbox account as root). The workers' batch
must give the plain path's outcomes, leave nothing of one submission to the
next in the same worker, and lose only the submission of a worker killed
under it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import nbformat
import pytest

from coursehub.grading.assignments import collect
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.job import AutogradeLimits, job_log_path
from coursehub.grading.demo import DEMO_ASSIGNMENT
from coursehub.grading.sandbox.worker import make_undumpable
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from test_grading_e2e import CORRECT, PS, answer, new_course

pytestmark = [pytest.mark.slow, pytest.mark.root]

#: A submission that reads the course's secrets (the sandbox hides them).
HOSTILE = """\
import os
for target in ({gradebook!r}, '/etc/shadow'):
    try:
        open(target, 'rb').read(1)
        print('READ', target)
    except OSError:
        pass
"""

#: The first submission of a worker plants things the next one must not find.
PLANT = """\
import builtins, json, os, pathlib
open('planted.txt', 'w').write('x')
pathlib.Path(os.environ['HOME'], 'planted.txt').write_text('x')
pathlib.Path(os.environ['TMPDIR'], 'planted.txt').write_text('x')
os.environ['COURSEHUB_PLANTED'] = '1'
json.PLANTED = 1
builtins.PLANTED = 1
print('PLANTED', os.getcwd())
"""
#: The next submission looks for them; it also tries to reach any other process's memory.
LOOK = """\
import builtins, json, os, pathlib
found = {{
    'cwd': os.path.exists('planted.txt'),
    'home': pathlib.Path(os.environ['HOME'], 'planted.txt').exists(),
    'tmpdir': pathlib.Path(os.environ['TMPDIR'], 'planted.txt').exists(),
    'old_cwd': os.path.exists({old_cwd!r} + '/planted.txt'),
    'env': 'COURSEHUB_PLANTED' in os.environ,
    'module': hasattr(json, 'PLANTED'),
    'builtin': hasattr(builtins, 'PLANTED'),
    'mem': [],
}}
for entry in os.listdir('/proc'):
    if entry.isdigit() and int(entry) not in (os.getpid(), os.getppid()):
        try:
            open('/proc/%s/mem' % entry, 'rb').close()
            found['mem'].append(open('/proc/%s/cmdline' % entry, 'rb').read()[:80].decode())
        except OSError:
            pass
print('FOUND' + json.dumps(found, sort_keys=True))
"""


def backend(tmp_path, slots=2):
    return LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", slots), use_cgroups=False, grace_s=1.0
    )


def outcomes_by(outcomes):
    return {o.student_id: (o.status, o.score) for o in outcomes}


def printed(layout, student):
    path = layout.course_dir / "autograded" / student / PS / f"{DEMO_ASSIGNMENT}.ipynb"
    notebook = nbformat.read(path, 4)
    return "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))


def worker_logs(layout):
    return sorted(p.name for p in (layout.reports_dir / "logs").glob("autograde-worker*.log"))


def test_workers_give_the_plain_paths_outcomes_hostile_and_looping_included(
    sandbox_user, tmp_path, monkeypatch
):
    monkeypatch.setenv("COURSEHUB_GRADING_FORK_SERVER", "true")
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=600)  # the limit must stop it
    hostile = HOSTILE.format(gradebook=str(layout.course_dir / "gradebook.db"))
    answer(layout, tmp_path, "aaron", "    while True:  # never ends\n        pass")
    answer(layout, tmp_path, "alice", CORRECT)
    answer(layout, tmp_path, "bob", "    return 0.0 * theta1")
    answer(layout, tmp_path, "dan", None)  # corrupt notebook
    answer(layout, tmp_path, "mallory", textwrap.indent(hostile, "    ") + CORRECT)
    collect(layout, PS)
    roster = ["aaron", "alice", "bob", "dan", "mallory"]
    limits = AutogradeLimits(n_threads=1, mem_limit=2**30, timeout_s=40)
    plain = autograde_assignment(layout, PS, roster, limits, backend(tmp_path), worker=False)
    assert worker_logs(layout) == []
    pooled = autograde_assignment(
        layout, PS, roster, limits, backend(tmp_path), worker=True, force=True
    )
    assert worker_logs(layout) != []  # the second batch ran in workers
    # and their kernels were forked from the workers' fork servers (the default)
    assert "forked" in job_log_path(layout, PS, "alice").read_text()
    assert "forked" in job_log_path(layout, PS, "mallory").read_text()
    assert (
        outcomes_by(pooled)
        == outcomes_by(plain)
        == {
            "aaron": ("killed", 0.0),
            "alice": ("graded", 4.0),
            "bob": ("graded", 0.0),
            "dan": ("corrupt", 0.0),
            "mallory": ("graded", 4.0),
        }
    )
    assert {o.student_id: o.message for o in pooled} == {o.student_id: o.message for o in plain}
    assert "READ" not in printed(layout, "mallory")


def test_a_submission_finds_nothing_the_previous_one_planted_in_the_same_worker(
    sandbox_user, tmp_path
):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=60)
    answer(layout, tmp_path, "a1", textwrap.indent(PLANT, "    ") + CORRECT)
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=1, mem_limit=2**30, timeout_s=120)
    # the first submission's working copy, to look for it from the second
    [first] = autograde_assignment(layout, PS, ["a1"], limits, backend(tmp_path), worker=True)
    old_cwd = printed(layout, "a1").split("PLANTED ", 1)[1].split()[0]
    answer(layout, tmp_path, "a2", textwrap.indent(LOOK.format(old_cwd=old_cwd), "    ") + CORRECT)
    collect(layout, PS)
    outcomes = autograde_assignment(
        layout, PS, ["a1", "a2"], limits, backend(tmp_path, 1), worker=True, force=True, parallel=1
    )
    assert outcomes_by(outcomes) == {"a1": ("graded", 4.0), "a2": ("graded", 4.0)}
    assert first.status == "graded"
    log = (layout.reports_dir / "logs" / "autograde-worker0.log").read_text()
    assert "grading worker" not in log  # PR_SET_DUMPABLE was set
    assert worker_logs(layout) == ["autograde-worker0.log"]  # one worker graded both
    text = printed(layout, "a2")
    assert "FOUND" in text, text
    found = json.loads(text.split("FOUND", 1)[1].splitlines()[0])
    assert found == {
        "builtin": False,
        "cwd": False,
        "env": False,
        "home": False,
        "mem": [],
        "module": False,
        "old_cwd": False,
        "tmpdir": False,
    }


#: Sleeps in its answer cell, so that the test can kill its worker meanwhile.
SLEEPER = "    import time\n    time.sleep(60)\n"


def kill_worker_when_grading(layout, student, killed):
    """Kill (SIGKILL) the worker process once ``student``'s kernel has started."""
    log = job_log_path(layout, PS, student)
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        if log.is_file() and "sandboxed kernel" in log.read_text(errors="replace"):
            found = subprocess.run(
                ["pgrep", "-f", f"sandbox.worker --requests {layout.course_dir}"],
                capture_output=True,
                text=True,
            )
            for pid in found.stdout.split():
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
            return
        time.sleep(0.2)


def test_a_killed_worker_scores_only_its_submission_0_and_the_rest_are_graded(
    sandbox_user, tmp_path
):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=120)
    answer(layout, tmp_path, "b1", CORRECT)
    answer(layout, tmp_path, "b2", SLEEPER + CORRECT)
    answer(layout, tmp_path, "b3", CORRECT)
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=1, mem_limit=2**30, timeout_s=150)
    killed: list[int] = []
    killer = threading.Thread(target=kill_worker_when_grading, args=(layout, "b2", killed))
    killer.start()
    outcomes = {
        o.student_id: o
        for o in autograde_assignment(
            layout, PS, ["b1", "b2", "b3"], limits, backend(tmp_path, 1), worker=True, parallel=1
        )
    }
    killer.join()
    assert killed
    assert outcomes_by(outcomes.values()) == {
        "b1": ("graded", 4.0),
        "b2": ("failed", 0.0),
        "b3": ("graded", 4.0),
    }
    assert "student b2: nbgrader failed" in outcomes["b2"].message
    assert len(worker_logs(layout)) == 2  # b3 was graded by a fresh worker
    # the killed worker's kernel fork server ended with it (nothing of the sandbox account runs)
    left = subprocess.run(["pgrep", "-u", sandbox_user], capture_output=True, text=True)
    assert left.stdout == ""


PEEK = """\
import os, sys, time
if sys.argv[1] == "undumpable":
    from coursehub.grading.sandbox.worker import make_undumpable
    assert make_undumpable()
print("ready", flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("undumpable", [False, True])
def test_a_process_of_the_workers_uid_cannot_read_an_undumpable_workers_memory(
    sandbox_user, undumpable
):
    """Same uid, no capabilities: ``/proc/PID/mem`` opens only while the target is dumpable."""
    from coursehub.sandbox.account import ensure_sandbox_account

    account = ensure_sandbox_account(sandbox_user)
    drop = ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}", "--clear-groups"]
    with subprocess.Popen(
        [*drop, sys.executable, "-c", PEEK, "undumpable" if undumpable else "plain"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ) as target:
        try:
            assert target.stdout is not None
            assert target.stdout.readline().strip() == "ready"
            peek = subprocess.run(
                [*drop, sys.executable, "-c", f"open('/proc/{target.pid}/mem', 'rb').close()"],
                capture_output=True,
                text=True,
            )
        finally:
            target.kill()
    assert (peek.returncode != 0) == undumpable, peek.stderr
    assert make_undumpable.__module__ == "coursehub.grading.sandbox.worker"
