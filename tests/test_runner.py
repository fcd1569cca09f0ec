"""The runner: command and environment (pure), bootstrap, limits, kill reasons, CLI front door."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.resources.spec import ResourceSpec
from coursehub.runner.api import make_spec, run, submit
from coursehub.runner.job import JobSpec, JobState
from coursehub.runner.jobenv import plan_command, plan_env
from coursehub.runner.local import LocalBackend
from coursehub.runner.result import RunResult, render_summary
from coursehub.runner.resultfile import read_result, write_result
from coursehub.runner.slots import SlotPool
from helpers import wait_until

MiB = 1024**2
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(60)\n"


def script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(body))
    return path


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    """Runs and slots directories in tmp_path, a 2-CPU budget; returns the runs directory."""
    monkeypatch.setenv("COURSEHUB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COURSEHUB_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSEHUB_CPU_BUDGET", "2")
    return tmp_path / "runs"


@pytest.fixture
def backend(tmp_path):
    """A local backend without cgroups (the watchdog path), 2 CPU slots in tmp_path."""
    return LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 2), use_cgroups=False, grace_s=1.0
    )


def test_plan_command_for_script_and_module():
    spec = JobSpec("train.py", ("a", 1))  # type: ignore[arg-type]
    assert plan_command(spec, "py") == [
        "py",
        "-m",
        "coursehub.runner.bootstrap",
        "train.py",
        "a",
        "1",
    ]
    spec = JobSpec("coursehub.pendulum.train", ("lstm", "5", "2"), module=True)
    assert plan_command(spec, "py")[3:] == ["-m", "coursehub.pendulum.train", "lstm", "5", "2"]


def test_plan_env_is_explicit_and_leaves_the_base_alone():
    base = {"PATH": "/bin", "OMP_NUM_THREADS": "28", "CUDA_VISIBLE_DEVICES": "0,1"}
    spec = JobSpec("x.py", resources=ResourceSpec(n_threads=3), env={"EXTRA": "1"})
    env = plan_env(spec, base)
    assert base == {"PATH": "/bin", "OMP_NUM_THREADS": "28", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert env["PATH"] == "/bin" and env["EXTRA"] == "1"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["COURSEHUB_N_THREADS"] == "3"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "COURSEHUB_GPU_MEM_FRACTION" not in env
    shared = plan_env(spec, base, gpu_indices=(1, 3), gpu_mem_fraction=0.25)
    assert shared["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert shared["COURSEHUB_GPU_MEM_FRACTION"] == "0.2500"


def test_render_summary():
    result = RunResult("j", 0, 12.34, 20.1, 2, 512 * MiB, None, Path("j.log"))
    assert render_summary(result) == (
        "[coursehub] exit 0 | elapsed 12.3 s | CPU 20.1 s | 2 threads | peak RSS 512.0 MiB"
    )
    killed = RunResult(
        "j",
        -9,
        1.0,
        0.5,
        1,
        100 * MiB,
        1288 * MiB,
        Path("j.log"),
        killed_reason="exceeded its memory limit of 2.0 GiB",
    )
    assert render_summary(killed) == (
        "[coursehub] killed: exceeded its memory limit of 2.0 GiB | elapsed 1.0 s | CPU 0.5 s"
        " | 1 thread | peak RSS 100.0 MiB | GPU peak 1.3 GiB"
    )


def test_job_states_are_the_strings_shown_and_stored():
    assert [str(state) for state in JobState] == ["queued", "running", "done"]
    assert JobState.RUNNING == "running" and json.dumps(JobState.DONE) == '"done"'
    assert f"{JobState.QUEUED}" == "queued"


def test_a_result_file_reads_back_as_written(tmp_path):
    result = RunResult("j", -9, 1.5, 0.5, 2, 1024, None, tmp_path / "j.log", "cancelled")
    write_result(result, tmp_path / "j.json")
    assert read_result(tmp_path / "j.json") == result
    assert (tmp_path / "j.json").stat().st_mode & 0o777 == 0o600
    assert read_result(tmp_path / "missing.json") is None


def test_run_streams_output_and_passes_arguments(tmp_path, backend):
    hello = script(
        tmp_path,
        "hello.py",
        """
        import os, sys
        env = os.environ
        print("args", sys.argv[1:], env["OMP_NUM_THREADS"], repr(env["CUDA_VISIBLE_DEVICES"]))
        print("name", __name__, "path0", sys.path[0])
        sys.exit(3)
    """,
    )
    seen: list[str] = []
    result = run(str(hello), ["a", "b c"], n_threads=2, backend=backend, on_output=seen.append)
    text = "".join(seen)
    assert "args ['a', 'b c'] 2 ''" in text
    assert f"name __main__ path0 {tmp_path}" in text
    assert result.returncode == 3 and result.killed_reason is None
    assert result.n_threads == 2 and result.cpu_s >= 0 and result.peak_rss_bytes > 0
    assert text.rstrip().splitlines()[-1] == render_summary(result)
    assert result.log_path.read_text() == text
    saved = json.loads(result.log_path.with_suffix(".json").read_text())
    assert saved["returncode"] == 3 and saved["enforcement"] == "watchdog"


def test_module_target_runs_with_cwd_on_path(tmp_path, backend):
    script(tmp_path, "mymod.py", "import sys\nprint('module', __name__, sys.argv[1:])\n")
    seen: list[str] = []
    result = run("mymod", ["x"], module=True, cwd=tmp_path, backend=backend, on_output=seen.append)
    assert result.ok and "module __main__ ['x']" in "".join(seen)


def test_child_torch_and_blas_pools_use_exactly_n_threads(tmp_path, backend):
    pytest.importorskip("torch")
    probe = script(
        tmp_path,
        "probe.py",
        """
        import json
        import numpy, torch
        from threadpoolctl import threadpool_info
        pools = [p["num_threads"] for p in threadpool_info()]
        counts = [torch.get_num_threads(), torch.get_num_interop_threads(), pools]
        print("PROBE", json.dumps(counts))
    """,
    )
    seen: list[str] = []
    result = run(str(probe), n_threads=2, backend=backend, on_output=seen.append)
    assert result.ok, "".join(seen)
    line = next(x for x in "".join(seen).splitlines() if x.startswith("PROBE"))
    torch_threads, interop, pools = json.loads(line.removeprefix("PROBE "))
    assert torch_threads == 2 and interop == 2
    assert pools and max(pools) <= 2


def test_timeout_is_reported(tmp_path, backend):
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    result = run(str(sleeper), timeout_s="1s", backend=backend, on_output=lambda _: None)
    assert result.killed_reason == "exceeded its time limit of 1 s"
    assert result.returncode == -signal.SIGTERM
    assert "killed: exceeded its time limit of 1 s" in result.log_path.read_text()


def test_sigterm_ignored_gets_sigkill_after_grace(tmp_path, backend):
    stubborn = script(
        tmp_path,
        "stubborn.py",
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """,
    )
    result = run(str(stubborn), timeout_s=0.5, backend=backend, on_output=lambda _: None)
    assert result.returncode == -signal.SIGKILL
    assert result.killed_reason == "exceeded its time limit of 0.5 s"


HOG = """
    import time
    blocks = [bytearray(10 * 2**20) for _ in range(30)]
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])
    print("allocated", flush=True)
    time.sleep(30)
"""


def test_memory_watchdog_kill_is_reported(tmp_path, backend):
    hog = script(tmp_path, "hog.py", HOG)
    result = run(str(hog), mem_limit="100M", backend=backend, on_output=lambda _: None)
    assert result.killed_reason == "exceeded its memory limit of 100.0 MiB"
    assert result.enforcement == "watchdog" and result.returncode == -signal.SIGKILL


@pytest.mark.root
def test_cgroup_limits_applied_while_running(tmp_path, cgroup_parent):
    backend = LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 2), cgroup_parent=cgroup_parent, grace_s=1.0
    )
    if backend.use_cgroups and os.path.isdir("/run/systemd/system"):
        pytest.skip("systemd host: jobs go through systemd-run")
    waiter = script(
        tmp_path,
        "waiter.py",
        """
        import os, sys, time
        print("cgroup", open("/proc/self/cgroup").read().replace("\\n", " "), flush=True)
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.05)
    """,
    )
    go = tmp_path / "go"
    job = submit(str(waiter), [str(go)], n_threads=2, mem_limit="100M", backend=backend)
    wait_until(lambda: in_its_cgroup(job), what="the job in its cgroup")
    cgroup = job.cgroup
    if cgroup.plan.version == 1:
        assert cgroup.read("cpu.cfs_quota_us") == "200000"
        assert cgroup.read("memory.limit_in_bytes") == str(100 * MiB)
    else:
        assert cgroup.read("cpu.max") == "200000 100000"
        assert cgroup.read("memory.max") == str(100 * MiB)
    go.touch()
    result = job.wait(timeout_s=30)
    assert result.ok and result.enforcement == f"cgroup v{cgroup.plan.version}"
    assert f"{cgroup_parent}/{job.job_id}" in job.output()
    assert not any(d.exists() for d in cgroup.plan.job_dirs)


@pytest.mark.root
def test_cgroup_memory_kill_is_reported(tmp_path, cgroup_parent):
    backend = LocalBackend(
        tmp_path / "runs", SlotPool(tmp_path / "slots", 2), cgroup_parent=cgroup_parent
    )
    hog = script(tmp_path, "hog.py", HOG)
    result = run(str(hog), mem_limit="100M", backend=backend, on_output=lambda _: None)
    assert result.enforcement.startswith(("cgroup", "systemd"))
    assert result.killed_reason == "exceeded its memory limit of 100.0 MiB"
    assert "allocated" not in result.log_path.read_text()


def test_cancel_while_running(tmp_path, backend):
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    job = submit(str(sleeper), backend=backend)
    while "up" not in job.output():
        assert job.poll() is None
        time.sleep(0.05)
    job.cancel()
    result = job.wait(timeout_s=30)
    assert result.killed_reason == "cancelled" and result.returncode == -signal.SIGTERM


def test_run_leaves_no_process_behind(tmp_path, backend):
    parent = script(
        tmp_path,
        "parent.py",
        """
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("grandchild", child.pid, flush=True)
    """,
    )
    seen: list[str] = []
    result = run(str(parent), backend=backend, on_output=seen.append)
    assert result.ok
    pid = int(next(x for x in "".join(seen).splitlines() if x.startswith("grandchild")).split()[1])
    wait_until(lambda: not _alive(pid), 2.0, 0.02, what=f"grandchild {pid} to exit")


def in_its_cgroup(job) -> bool:
    """Whether ``job`` runs in its cgroup yet; fails at once if it has already exited."""
    assert job.poll() is None, f"the job exited: {job.output()}"
    return job.cgroup is not None and bool(job.cgroup.pids())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_make_spec_rejects_bad_values():
    with pytest.raises(UsageError, match="n_threads"):
        make_spec("x.py", n_threads=0)
    with pytest.raises(UsageError, match="memory size"):
        make_spec("x.py", mem_limit="lots")
    with pytest.raises(UsageError, match="duration"):
        make_spec("x.py", timeout_s="soon")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--threads", "0", "--", "ok.py"], "--threads must be a positive integer"),
        (["--threads", "two", "--", "ok.py"], "--threads must be a positive integer"),
        (["--threads", "3", "--", "ok.py"], "more than this machine's CPU budget of 2"),
        (["--mem", "4X", "--", "ok.py"], "memory size must be"),
        (["--gpus", "1", "--", "ok.py"], "1 GPU(s) asked for, but this machine has 0"),
        (["--gpus", "-1", "--", "ok.py"], "--gpus must be a non-negative integer"),
        (["--timeout", "soon", "--", "ok.py"], "duration must be"),
        (["--timeout", "0", "--", "ok.py"], "duration must be positive"),
        (["--", "missing.py"], "script not found"),
        (["--", "-m", "no_such_module_xyz"], "module not found: no_such_module_xyz"),
        (["-m", "no_such_module_xyz", "x"], "module not found: no_such_module_xyz"),
        ([], "no script given"),
        (["--no-wait", "--", "missing.py"], "script not found"),
        (["--no-wait", "--log", "nodir/x.log", "--", "ok.py"], "folder nodir does not exist"),
        (["--log", "nodir/x.log", "--", "ok.py"], "--log nodir/x.log: folder nodir does not"),
    ],
)
def test_cli_bad_input_exits_2_and_starts_nothing(
    argv, message, tmp_path, runner_env, monkeypatch, capsys
):
    if any(a.startswith("--gpus") for a in argv) and Path("/dev/nvidiactl").exists():
        pytest.skip("a GPU is present")
    monkeypatch.chdir(tmp_path)
    script(tmp_path, "ok.py", "open('started', 'w').close()\n")
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("coursehub: error: ")
    assert not (tmp_path / "started").exists()
    assert not runner_env.exists() or not any(runner_env.iterdir())


def test_cli_run_returns_the_job_status(tmp_path, runner_env, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    script(tmp_path, "fail.py", "import sys\nprint('hi')\nsys.exit(4)\n")
    assert main(["run", "--threads", "1", "--", "fail.py"]) == 4
    out = capsys.readouterr().out
    assert out.startswith("hi\n") and out.rstrip().splitlines()[-1].startswith(
        "[coursehub] exit 4 |"
    )


def test_cli_no_wait_returns_then_job_completes(tmp_path, runner_env):
    done = script(tmp_path, "done.py", "import sys\nopen(sys.argv[1], 'w').write('ok')\n")
    log = tmp_path / "job.log"
    env = {**os.environ, "COURSEHUB_RUNS_DIR": str(runner_env)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "coursehub",
            "run",
            "--no-wait",
            "--log",
            str(log),
            "--",
            str(done),
            str(tmp_path / "flag"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert f"output in {log}" in out.stdout
    result_file = log.with_suffix(".json")
    wait_until(result_file.exists, 60, 0.1, what=f"the result file {result_file}")
    assert json.loads(result_file.read_text())["returncode"] == 0
    assert (tmp_path / "flag").read_text() == "ok"


def test_configure_torch_caps_threads_and_shared_gpu_memory():
    from types import SimpleNamespace

    from coursehub.runner.bootstrap import configure_torch

    calls: list[tuple] = []
    cuda = SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 2,
        set_per_process_memory_fraction=lambda f, d: calls.append(("fraction", f, d)),
    )
    torch = SimpleNamespace(
        set_num_threads=lambda n: calls.append(("threads", n)),
        set_num_interop_threads=lambda n: calls.append(("interop", n)),
        cuda=cuda,
    )
    configure_torch(torch, 3, 0.25)  # type: ignore[arg-type]
    assert calls == [("threads", 3), ("interop", 3), ("fraction", 0.25, 0), ("fraction", 0.25, 1)]
    calls.clear()
    configure_torch(torch, 1, None)  # type: ignore[arg-type]
    assert calls == [("threads", 1), ("interop", 1)]


@pytest.mark.gpu
def test_gpu_job_sees_one_gpu_and_reports_its_memory(tmp_path):
    from coursehub.resources.gpus import gpu_inventory

    if not gpu_inventory():
        pytest.skip("no NVIDIA GPU here")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    probe = script(
        tmp_path,
        "gpu.py",
        """
        import os, time, torch
        x = torch.ones(256, 1024, 1024, device="cuda")  # 1 GiB
        print("GPU", torch.cuda.device_count(), os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
        time.sleep(1.0)
    """,
    )
    pool = SlotPool(tmp_path / "slots", 1, gpu_count=1, gpu_jobs=2)
    backend = LocalBackend(tmp_path / "runs", pool, use_cgroups=False)
    seen: list[str] = []
    result = run(str(probe), gpus=1, backend=backend, on_output=seen.append)
    assert result.ok, "".join(seen)
    assert "GPU 1 0" in "".join(seen)
    assert result.gpu_indices == (0,)
    assert result.gpu_peak_bytes is not None and result.gpu_peak_bytes >= 1024**3
