"""The runner on a real single-node Slurm (tests/slurmfixture.py): limits, queueing, cancelling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from coursehub.cli import main
from coursehub.runner.api import run, submit
from coursehub.runner.magic import coursehub_run
from coursehub.runner.slurm.backend import SlurmBackend
from coursehub.runner.slurm.plan import SlurmPlacement
from helpers import wait_until

pytestmark = pytest.mark.slurm

SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(120)\n"


def script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(body))
    return path


def queued_jobs() -> list[str]:
    return subprocess.run(
        ["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True
    ).stdout.split()


@pytest.fixture
def backend(slurm_cluster, tmp_path, monkeypatch):
    """A Slurm backend on the session's cluster, runs in tmp_path; checks nothing stays queued."""
    monkeypatch.setenv("COURSEHUB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    yield SlurmBackend(SlurmPlacement(partition=slurm_cluster.partition), tmp_path / "runs")
    try:
        wait_until(lambda: queued_jobs() == [], timeout_s=20, what="the queue to empty")
    finally:  # a job left by a failed test must not hold the node for the next ones
        for job_id in queued_jobs():
            subprocess.run(["scancel", job_id], capture_output=True, timeout=30)


def test_threads_inside_a_slurm_job_equal_threads(backend, tmp_path):
    probe = script(
        tmp_path,
        "probe.py",
        """
        import json, os
        import torch
        print(json.dumps({"omp": os.environ["OMP_NUM_THREADS"],
                          "torch": torch.get_num_threads(),
                          "cpus": len(os.sched_getaffinity(0)),
                          "slurm": os.environ["SLURM_CPUS_PER_TASK"]}))
        """,
    )
    lines: list[str] = []
    result = run(str(probe), backend=backend, n_threads=2, on_output=lines.append)
    seen = json.loads(next(line for line in "".join(lines).splitlines() if line.startswith("{")))
    assert result.ok, "".join(lines)
    assert seen == {"omp": "2", "torch": 2, "cpus": 2, "slurm": "2"}
    assert result.n_threads == 2 and result.enforcement == "slurm"
    assert "".join(lines).rstrip().splitlines()[-1].startswith("[coursehub] exit 0 | elapsed")


def test_a_slurm_job_over_its_memory_is_killed_with_a_clear_message(backend, tmp_path):
    hog = script(
        tmp_path,
        "hog.py",
        """
        import time
        blocks = []
        for _ in range(100):
            blocks.append(bytearray(20 * 1024 * 1024))
            time.sleep(0.02)
        print("survived")
        """,
    )
    lines: list[str] = []
    result = run(str(hog), backend=backend, mem_limit="100M", on_output=lines.append)
    assert result.killed_reason == (
        f"Slurm job {result.job_id} exceeded its memory limit of 100.0 MiB (OUT_OF_MEMORY)"
    )
    assert result.returncode != 0
    assert "survived" not in "".join(lines)


def test_a_slurm_job_over_its_time_is_cancelled_with_a_clear_message(backend, tmp_path):
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    result = run(str(sleeper), backend=backend, timeout_s="3s", on_output=lambda text: None)
    assert result.killed_reason == f"Slurm job {result.job_id} exceeded its time limit of 3 s"
    assert result.returncode == -signal.SIGTERM


def test_two_jobs_that_each_need_every_cpu_run_one_after_the_other(
    backend, tmp_path, slurm_cluster
):
    stamp = script(
        tmp_path,
        "stamp.py",
        """
        import sys, time
        with open(sys.argv[1], "a") as log:
            log.write(f"start {time.time()}\\n")
        time.sleep(3)
        with open(sys.argv[1], "a") as log:
            log.write(f"end {time.time()}\\n")
        """,
    )
    n = slurm_cluster.cpus
    first = submit(str(stamp), [str(tmp_path / "a")], backend=backend, n_threads=n)
    second = submit(str(stamp), [str(tmp_path / "b")], backend=backend, n_threads=n)
    wait_until(lambda: first.state == "running", timeout_s=20, what="the first job to start")
    assert second.state == "queued"
    assert first.wait(60).ok and second.wait(60).ok
    first_end = float((tmp_path / "a").read_text().split()[-1])
    second_start = float((tmp_path / "b").read_text().split()[1])
    assert second_start >= first_end


def test_ctrl_c_on_coursehub_run_cancels_the_slurm_job(backend, tmp_path):
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    # Ctrl-C at a terminal: SIGINT at its default, whatever this test's launcher did
    # (a background job of a non-interactive shell starts with SIGINT ignored, and a
    # child keeps an ignored signal ignored: signal(7); Python then raises no
    # KeyboardInterrupt)
    proc = subprocess.Popen(
        [sys.executable, "-m", "coursehub", "run", "--backend", "slurm", "--", str(sleeper)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "up"
    job_id = queued_jobs()[0]
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert f"Slurm job {job_id} cancelled" in out
    assert job_id not in queued_jobs()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--partition", "nope"], "coursehub: error: unknown Slurm partition 'nope'\n"),
        (
            ["--mem", "100T"],
            "coursehub: error: no node of partition 'debug' is large enough for this job "
            "(1 CPU, 100.0 TiB)\n",
        ),
    ],
)
def test_a_job_slurm_refuses_is_one_line_exit_2_and_nothing_queued(
    backend, tmp_path, capsys, options, message
):
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    extra = [] if "--partition" in options else ["--partition", "debug"]
    assert main(["run", "--backend", "slurm", *extra, *options, "--", str(sleeper)]) == 2
    assert capsys.readouterr().err == message
    assert queued_jobs() == []


def test_more_threads_than_any_node_has_is_cancelled_with_its_cause(
    backend, tmp_path, capsys, slurm_cluster
):
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    threads = str(slurm_cluster.cpus + 1)
    assert main(["run", "--backend", "slurm", "--threads", threads, "--", str(sleeper)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coursehub: error: Slurm job ")
    assert (
        f"can never start: no node of partition 'debug' is large enough for it ({threads} CPUs)"
        in err
    )
    assert err.rstrip().endswith("(PartitionConfig); it was cancelled")


def test_an_unreachable_slurm_is_one_line(tmp_path, slurm_cluster, monkeypatch, capsys):
    conf = slurm_cluster.conf.read_text()
    dead = tmp_path / "slurm.conf"
    dead.write_text(
        conf.replace("SlurmctldHost=", "SlurmctldHost=nohost-")
        .replace("(127.0.0.1)", "(127.0.0.1)\nMessageTimeout=2", 1)
        .replace("SlurmctldPort=", "SlurmctldPort=1")
    )
    monkeypatch.setenv("SLURM_CONF", str(dead))
    monkeypatch.setenv("COURSEHUB_RUNS_DIR", str(tmp_path / "runs"))
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    assert main(["run", "--backend", "slurm", "--", str(sleeper)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coursehub: error: Slurm is unreachable: ")
    assert err.count("\n") == 1


def test_no_wait_prints_the_job_id_then_status_and_cancel_follow_it(backend, tmp_path, capsys):
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    assert main(["run", "--backend", "slurm", "--no-wait", "--", str(sleeper)]) == 0
    out = capsys.readouterr().out
    job_id = out.split("Slurm job ")[1].split(":")[0]
    assert out.startswith(f"[coursehub] submitted Slurm job {job_id}: output in ")
    assert main(["run", "status", job_id]) == 0
    assert capsys.readouterr().out.startswith(f"Slurm job {job_id}: ")
    assert main(["run", "cancel", job_id]) == 0
    assert capsys.readouterr().out == f"Slurm job {job_id}: cancelled\n"
    wait_until(lambda: job_id not in queued_jobs(), timeout_s=20, what="the job to go")
    assert main(["run", "status", job_id]) == 0
    assert "CANCELLED" in capsys.readouterr().out


def test_the_magic_uses_the_configured_backend(backend, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSEHUB_RUNNER_BACKEND", "slurm")
    script(tmp_path, "train.py", "import os\nprint('threads', os.environ['OMP_NUM_THREADS'])\n")
    shell = SimpleNamespace(user_ns={})  # the magic only stores its result there
    coursehub_run("--threads 2 train.py", shell)
    assert "threads 2" in capsys.readouterr().out
    assert shell.user_ns["coursehub_last_run"].enforcement == "slurm"


def test_the_contention_benchmark_runs_managed_students_as_slurm_jobs(
    backend, tmp_path, slurm_cluster
):
    from coursehub.bench.contention import ensure_dataset, run_scenario
    from coursehub.bench.scenarios import Scenario
    from coursehub.bench.students import BenchSettings

    data = ensure_dataset(tmp_path / "data.npz")
    n = slurm_cluster.cpus
    settings = BenchSettings((), steps=2, cpu_budget=n, timeout_s=300, backend="slurm")
    result = run_scenario(Scenario("overcommit", 2, float(n), n), data, settings, tmp_path)
    first, second = sorted(result.students, key=lambda s: s.end_s)
    assert [s.returncode for s in (first, second)] == [0, 0]
    assert {s.enforcement for s in (first, second)} == {"slurm"}
    assert first.torch_threads == second.torch_threads == n
    # Slurm held the second while the first had every core: it waited for a whole run
    assert second.queued_s > first.queued_s


def test_a_slurm_job_is_recorded_in_its_courses_usage(backend, tmp_path, monkeypatch):
    from coursehub.meter.journal import read_records

    usage = tmp_path / "usage"
    usage.mkdir(mode=0o700)
    monkeypatch.setenv("COURSEHUB_USAGE_DIR", str(usage))
    monkeypatch.setenv("COURSEHUB_COURSE_ID", "mlmeca-2025")
    busy = script(tmp_path, "busy.py", "x = sum(i * i for i in range(3_000_000))\nprint(x)\n")
    result = run(str(busy), backend=backend, n_threads=1)
    assert result.ok
    records = [r for f in sorted(usage.iterdir()) for r in read_records(f).records]
    closes = [r for r in records if r.event == "close"]
    assert len(closes) == 1, records
    close = closes[0]
    assert (close.kind, close.course_id) == ("job", "mlmeca-2025")
    assert close.cpu_s == pytest.approx(result.cpu_s) and close.cpu_s > 0
    assert close.mem_peak_bytes == result.peak_rss_bytes
