"""The nspawn tests' helpers: a preflight that skips saying why; the leader is PID 1."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from nspawnbox import _leader, preflight


@pytest.mark.skipif(shutil.which("systemd-nspawn") is None, reason="no systemd-nspawn")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (systemd-nspawn)")
def test_a_container_that_cannot_start_skips_with_systemd_nspawns_own_words(tmp_path):
    with pytest.raises(pytest.skip.Exception) as skipped:
        preflight(tmp_path / "no-root")  # no root file system: nspawn refuses at once
    said = str(skipped.value)
    assert said.startswith("systemd-nspawn cannot run here: systemd-nspawn --quiet -D "), said
    assert "--pipe /bin/true: " in said and len(said) > 60, said


@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a PID namespace)")
def test_the_leader_is_the_child_that_is_pid_1_of_its_namespace_not_the_first_child():
    # As systemd-nspawn's outer child: a child in the host's PID namespace comes first.
    script = "sleep 30 & exec unshare --pid --fork sleep 30"
    parent = subprocess.Popen(["sh", "-c", script])
    try:
        leader = _leader(parent.pid, time.monotonic() + 10)
        status = Path(f"/proc/{leader}/status").read_text().splitlines()
        nspid = [ln for ln in status if ln.startswith("NSpid:")]
        assert nspid and nspid[0].split()[1:] == [str(leader), "1"], nspid
        children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
        assert len(children) == 2 and children.index(str(leader)) == 1, children
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)])
        parent.kill()
        parent.wait()
