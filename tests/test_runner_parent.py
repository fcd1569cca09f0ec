"""A job never outlives its runner (unless detached), always keeps its time limit, frees its slots.

Each test starts ``coursehub run`` as a real process with its own slots
directory and a CPU budget of 2, lets its job take both slots, then kills
the runner (SIGKILL: no clean-up of its own is possible) and checks that the
job is gone (or, detached, ended at its time limit) and that a next job is
admitted without queuing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from coursehub.runner.job import JobSpec
from coursehub.runner.limits import plan_backstop_reason
from coursehub.runner.watchdog import BACKSTOP_S, plan_backstop_at, plan_stop_at
from helpers import WaitTimeoutError, wait_until

pytestmark = pytest.mark.slow

SLEEPER = (
    "import os, subprocess, sys, time\n"
    "subprocess.Popen(['sleep', '300'], close_fds=False)  # a grandchild with the slot fds\n"
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {os.getppid()}')\n"
    "time.sleep(300)\n"
)


def env_for(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "COURSEHUB_SLOTS_DIR": str(tmp_path / "slots"),
        "COURSEHUB_RUNS_DIR": str(tmp_path / "runs"),
        "COURSEHUB_CPU_BUDGET": "2",
    }


def start(tmp_path: Path, *options: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start ``coursehub run --threads 2 OPTIONS -- sleeper``; return (runner, job pid, parent)."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    pids = tmp_path / "pids"
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coursehub",
            "run",
            "--threads",
            "2",
            *options,
            "--",
            str(tmp_path / "sleeper.py"),
            str(pids),
        ],
        env=env_for(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    job, parent = map(int, wait_for_pids(pids).split())
    return runner, job, parent


def wait_for_pids(pids: Path) -> str:
    """Return the content of the job's pid file once it has one (30 s at most)."""
    return wait_until(lambda: pids.is_file() and pids.read_text(), what=f"the pids in {pids}")


def is_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (no such process, or a zombie)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return True
    return stat == "Z"


def gone(pid: int, within_s: float) -> bool:
    """Whether ``pid`` exits within ``within_s`` seconds."""
    try:
        return wait_until(lambda: is_gone(pid), within_s, 0.1, what=f"process {pid} to exit")
    except WaitTimeoutError:
        return False


def next_job_output(tmp_path: Path) -> str:
    (tmp_path / "quick.py").write_text("print('quick job ran')\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coursehub",
            "run",
            "--threads",
            "2",
            "--timeout",
            "60s",
            "--",
            str(tmp_path / "quick.py"),
        ],
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP, signal.SIGTERM])
def test_a_job_dies_with_its_runner_and_the_next_job_is_admitted_at_once(tmp_path, sig):
    runner, job, parent = start(tmp_path, "--timeout", "10m")
    assert parent == runner.pid
    runner.send_signal(sig)
    runner.wait()
    assert gone(job, within_s=20), f"job {job} outlived its runner ({sig.name})"
    out = next_job_output(tmp_path)
    assert "quick job ran" in out and "queued" not in out


def test_a_detached_job_outlives_its_runner_but_not_its_time_limit(tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "coursehub",
            "run",
            "--no-wait",
            "--threads",
            "2",
            "--timeout",
            "4s",
            "--",
            str(tmp_path / "sleeper.py"),
            str(tmp_path / "pids"),
        ],
        env=env_for(tmp_path),
        check=True,
        capture_output=True,
    )
    job, detached_runner = map(int, wait_for_pids(tmp_path / "pids").split())
    os.kill(detached_runner, signal.SIGKILL)
    assert not gone(job, within_s=1), "a --no-wait job must not die with its runner"
    assert gone(job, within_s=30), "the detached job escaped its --timeout"
    out = next_job_output(tmp_path)
    assert "quick job ran" in out and "queued" not in out


def test_an_orphan_is_stopped_at_once_unless_detached():
    assert plan_stop_at(100.0, 90.0, "kill", 60.0) == 100.0
    assert plan_stop_at(100.0, 90.0, "keep", 60.0) == 150.0
    assert plan_stop_at(100.0, 90.0, "keep", None) is None


def test_a_nested_job_does_not_inherit_the_watchdog_of_its_parent_job():
    from coursehub.runner.jobenv import plan_env

    env = plan_env(JobSpec("x.py"), {"COURSEHUB_PARENT_FD": "7", "COURSEHUB_SLOT_FDS": "3,4"})
    assert "COURSEHUB_PARENT_FD" not in env and "COURSEHUB_SLOT_FDS" not in env


DAEMON = (
    "import os, sys, time\n"
    "if os.fork() == 0:  # a daemon: own session, double fork, the slot fds inherited\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        open(sys.argv[1] + '.daemon', 'w').write(str(os.getpid()))\n"
    "        time.sleep(300)\n"
    "    os._exit(0)\n"
    "while not os.path.exists(sys.argv[1] + '.daemon'):\n"
    "    time.sleep(0.05)\n"
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {os.getppid()}')\n"
    "time.sleep(float(sys.argv[2]))\n"
)


def slots_free(slots_dir: Path) -> bool:
    """Return True if every CPU slot file can be locked now (nobody holds one)."""
    import fcntl

    for path in sorted(slots_dir.glob("cpu-*.slot")):
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
    return True


def test_a_daemon_forked_by_a_job_does_not_keep_the_slots_after_the_job_ends(tmp_path):
    from coursehub.resources.spec import ResourceSpec
    from coursehub.runner.local import LocalBackend
    from coursehub.runner.slots import SlotPool

    (tmp_path / "daemon.py").write_text(DAEMON)
    pids = tmp_path / "pids"
    pool = SlotPool(tmp_path / "slots", 2)
    backend = LocalBackend(tmp_path / "runs", pool, use_cgroups=False, grace_s=1.0)
    spec = JobSpec(
        str(tmp_path / "daemon.py"),
        args=(str(pids), "0"),
        cwd=str(tmp_path),
        resources=ResourceSpec(n_threads=2),
    )
    try:
        result = backend.submit(spec).wait(60)
        assert result.returncode == 0
        assert slots_free(tmp_path / "slots"), "a daemon of the ended job holds its slots"
    finally:
        daemon = Path(f"{pids}.daemon")
        if daemon.is_file():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(daemon.read_text()), signal.SIGKILL)


@pytest.mark.root
def test_a_daemon_in_the_jobs_cgroup_dies_with_the_job_when_the_runner_is_killed(tmp_path):
    (tmp_path / "daemon.py").write_text(DAEMON)
    pids = tmp_path / "pids"
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coursehub",
            "run",
            "--threads",
            "2",
            "--timeout",
            "10m",
            "--",
            str(tmp_path / "daemon.py"),
            str(pids),
            "300",
        ],
        env=env_for(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_pids(pids)
    daemon = int(Path(f"{pids}.daemon").read_text())
    try:
        runner.kill()
        runner.wait()
        assert gone(daemon, within_s=20), "the job's daemon outlived the killed runner"
        out = next_job_output(tmp_path)
        assert "quick job ran" in out and "queued" not in out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)


def test_a_jobs_log_and_result_are_readable_by_its_owner_only(tmp_path):
    from coursehub.runner.local import LocalBackend
    from coursehub.runner.slots import SlotPool

    (tmp_path / "hello.py").write_text("print('my secret output')\n")
    backend = LocalBackend(tmp_path / "runs", SlotPool(tmp_path / "slots", 2), use_cgroups=False)
    result = backend.submit(JobSpec(str(tmp_path / "hello.py"))).wait(60)
    assert "my secret output" in result.log_path.read_text()
    assert (tmp_path / "runs").stat().st_mode & 0o777 == 0o700
    assert result.log_path.stat().st_mode & 0o777 == 0o600
    assert result.log_path.with_suffix(".json").stat().st_mode & 0o777 == 0o600


def test_the_watchdog_kills_every_other_process_of_the_jobs_cgroups():
    from coursehub.runner.watchdog import plan_sweep

    assert plan_sweep(["12\n34\n", "34\n56\n"], me=34) == [12, 56]
    assert plan_sweep(["", "34\n"], me=34) == []


def test_a_stopped_runner_does_not_stop_its_job_keeping_its_time_limit_or_its_slots(tmp_path):
    runner, job, _ = start(tmp_path, "--timeout", "2s")
    runner.send_signal(signal.SIGSTOP)  # Ctrl-Z, a frozen kernel: the lifeline stays open
    try:
        assert gone(job, within_s=10), "the job ran past its --timeout while its runner was stopped"
        out = next_job_output(tmp_path)  # the runner is still stopped
        assert "quick job ran" in out and "queued" not in out
    finally:
        runner.send_signal(signal.SIGCONT)
        runner.wait(timeout=30)
    log = next((tmp_path / "runs").glob("*sleeper*.log")).read_text()
    # "(stopped by its watchdog)" follows unless the runner was stopped mid-check
    assert "killed: exceeded its time limit of 2 s" in log


def test_the_watchdog_stops_a_job_whose_runner_lives_just_after_its_time_limit():
    assert plan_backstop_at(90.0, 60.0) == 90.0 + 60.0 + BACKSTOP_S
    assert plan_backstop_at(90.0, None) is None


def test_a_job_signalled_after_its_limit_the_runner_did_not_enforce_says_so():
    assert plan_backstop_reason(-signal.SIGTERM, 5.0, 2.0) == (
        "exceeded its time limit of 2 s (stopped by its watchdog)"
    )
    assert plan_backstop_reason(-signal.SIGKILL, 1.0, 2.0) is None
    assert plan_backstop_reason(1, 5.0, 2.0) is None
    assert plan_backstop_reason(-signal.SIGTERM, 5.0, None) is None
