"""The demo, a child subreaper, reaps the orphans it adopts: a runner job's watchdog (a double
fork, as every autograde and book build starts) left one zombie each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from coursehub.demo.processes import plan_reaps

# A subreaper runs one runner job (its watchdog is orphaned to the subreaper), waits for the
# watchdog to end, and says how many zombie children it has before and after reaping.
SUBREAPER = textwrap.dedent(
    """
    import json, subprocess, sys, time
    import psutil
    from coursehub.demo.processes import become_subreaper, reap_orphans

    def zombies():
        return [c.pid for c in psutil.Process().children() if c.status() == "zombie"]

    assert become_subreaper()
    subprocess.run(
        [sys.executable, "-m", "coursehub", "run", "--threads", "1", "--", sys.argv[1]],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not zombies() and time.monotonic() < deadline:
        time.sleep(0.05)
    before = zombies()
    reaped = reap_orphans()
    print(json.dumps({"before": before, "reaped": reaped, "after": zombies()}))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="child subreapers are Linux's")
def test_a_runner_jobs_orphaned_watchdog_is_reaped_by_the_subreaper(tmp_path):
    env_runs = {"COURSEHUB_RUNS_DIR": str(tmp_path / "runs")}
    job = tmp_path / "job.py"
    job.write_text("print('done')\n")
    done = subprocess.run(
        [sys.executable, "-c", SUBREAPER, str(job)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env_runs, "COURSEHUB_SLOTS_DIR": str(tmp_path / "slots")},
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"], "the job's watchdog should have been adopted, then ended"
    assert sorted(seen["reaped"]) == sorted(seen["before"])
    assert seen["after"] == []


def test_only_zombies_that_no_popen_waits_for_are_reaped():
    children = [(10, "zombie"), (11, "sleeping"), (12, "zombie")]
    assert plan_reaps(children, keep={12}) == [10]
    assert plan_reaps([], keep=()) == []
