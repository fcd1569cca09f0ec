"""One autograde of an assignment at a time; the lock dies with its holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from coursehub.grading.autograde.lock import (
    LOCK_FD_VAR,
    AutogradeRunningError,
    acquire_autograde_lock,
    autograde_lock,
    lock_path,
)
from coursehub.grading.layout import make_layout


@pytest.fixture
def layout(tmp_path):
    return make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange")


def test_a_second_autograde_is_refused_with_who_when_and_pid(layout):
    with (
        autograde_lock(layout, "ps1", {"JUPYTERHUB_USER": "sleclerc"}),
        pytest.raises(AutogradeRunningError) as refused,
    ):
        acquire_autograde_lock(layout, "ps1", "bob")
    message = str(refused.value)
    assert "autograde of ps1 (course phys-2025) is already running, started by sleclerc" in message
    assert f"pid {os.getpid()}" in message
    acquire_autograde_lock(layout, "ps1", "bob").release()  # free again afterwards


def test_another_assignment_is_not_blocked(layout):
    with autograde_lock(layout, "ps1", {"JUPYTERHUB_USER": "a"}):
        acquire_autograde_lock(layout, "ps2", "b").release()


def test_the_lock_of_a_killed_autograde_is_not_stale(layout):
    root, exchange = str(layout.course_dir.parent), str(layout.exchange_root)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom coursehub.grading.layout import make_layout\n"
            "from coursehub.grading.autograde.lock import acquire_autograde_lock\n"
            f"lock = acquire_autograde_lock(make_layout('phys-2025', {root!r}, {exchange!r}),"
            " 'ps1', 'x')\nprint('held', flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    with pytest.raises(AutogradeRunningError, match=f"pid {holder.pid}"):
        acquire_autograde_lock(layout, "ps1", "y")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    acquire_autograde_lock(layout, "ps1", "y").release()


def test_the_process_started_by_the_course_app_adopts_the_handed_over_lock(layout):
    lock = acquire_autograde_lock(layout, "ps1", "sleclerc")
    with autograde_lock(layout, "ps1", {LOCK_FD_VAR: str(lock.fd)}) as adopted:
        assert adopted.fd == lock.fd
        with pytest.raises(AutogradeRunningError, match="started by sleclerc"):
            acquire_autograde_lock(layout, "ps1", "other")
    assert lock_path(layout, "ps1").is_file()
    acquire_autograde_lock(layout, "ps1", "other").release()
