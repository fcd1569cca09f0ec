"""``pid_running``: one answer, for every part that records a pid, to "does it still run?"."""

import os
import subprocess
import sys

import pytest

from coursehub.resources.processes import pid_running
from helpers import wait_until


def test_this_process_runs():
    assert pid_running(os.getpid())


def test_a_child_runs_then_its_zombie_counts_as_gone_then_its_reaped_pid_too():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        assert pid_running(child.pid)
        child.stdin.close()  # it exits; not reaped yet: a zombie
        wait_until(lambda: not pid_running(child.pid), 10.0, 0.02, what="the child's exit")
        assert child.poll() is not None  # it was a zombie until this reaped it
    finally:
        child.kill()
        child.wait()
    assert not pid_running(child.pid)


@pytest.mark.parametrize("pid", [None, "123", 0, -1, True, 1.5, {"pid": 1}])
def test_what_is_not_a_pid_is_not_running(pid):
    assert not pid_running(pid)
