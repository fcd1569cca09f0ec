"""Admission control: CPU slots never oversubscribed, arrival order, dead holders free slots."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coursehub.runner.api import submit
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import AdmissionCancelledError, SlotPool, describe_queue
from helpers import wait_until

STAMP = """
    import sys, time
    start = time.time()
    time.sleep(float(sys.argv[2]))
    open(sys.argv[1], "w").write(f"{start} {time.time()}")
"""


def _backend(tmp_path: Path, cpu_budget: int = 2) -> LocalBackend:
    pool = SlotPool(tmp_path / "slots", cpu_budget, poll_s=0.05)
    return LocalBackend(tmp_path / "runs", pool, use_cgroups=False, grace_s=1.0)


def _stamp_script(tmp_path: Path) -> str:
    path = tmp_path / "stamp.py"
    path.write_text(textwrap.dedent(STAMP))
    return str(path)


def _intervals(paths: list[Path]) -> list[tuple[float, float]]:
    return [tuple(map(float, p.read_text().split())) for p in paths]  # type: ignore[misc]


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    return max(sum(1 for s, e in intervals if s <= start < e) for start, _ in intervals)


def wait_for_output(job, text: str) -> None:
    wait_until(lambda: text in job.output(), what=f"{text!r} in the job's output")


def test_four_one_thread_jobs_on_two_cpus_never_overlap_more_than_two(tmp_path):
    backend, stamp = _backend(tmp_path), _stamp_script(tmp_path)
    outs = [tmp_path / f"job{i}.out" for i in range(4)]
    jobs = [submit(stamp, [str(out), "0.4"], n_threads=1, backend=backend) for out in outs]
    results = [job.wait(timeout_s=60) for job in jobs]
    assert all(r.ok for r in results)
    assert _max_overlap(_intervals(outs)) <= 2


def test_two_thread_job_takes_two_slots(tmp_path):
    backend, stamp = _backend(tmp_path, cpu_budget=3), _stamp_script(tmp_path)
    outs = [tmp_path / f"job{i}.out" for i in range(3)]
    jobs = [submit(stamp, [str(outs[0]), "0.4"], n_threads=2, backend=backend)]
    jobs += [submit(stamp, [str(out), "0.4"], n_threads=2, backend=backend) for out in outs[1:]]
    assert all(job.wait(timeout_s=60).ok for job in jobs)
    assert _max_overlap(_intervals(outs)) == 1  # 2 + 2 threads never fit in 3 CPUs


def test_waiting_job_says_so_and_starts_when_slots_free(tmp_path):
    backend, stamp = _backend(tmp_path), _stamp_script(tmp_path)
    holder = backend.slots.acquire(2)
    job = submit(stamp, [str(tmp_path / "out"), "0"], backend=backend)
    wait_for_output(job, "[coursehub] queued: next in line")
    assert job.state == "queued" and job.poll() is None
    holder.release()
    assert job.wait(timeout_s=30).ok
    assert job.wait().queued_s > 0


def test_jobs_start_in_arrival_order(tmp_path):
    backend, stamp = _backend(tmp_path), _stamp_script(tmp_path)
    holder = backend.slots.acquire(2)
    big = submit(stamp, [str(tmp_path / "big"), "0.2"], n_threads=2, backend=backend)
    wait_for_output(big, "queued")
    small = submit(stamp, [str(tmp_path / "small"), "0"], n_threads=1, backend=backend)
    wait_for_output(small, "queued: 1 job ahead")
    os.close(holder.fds.pop())  # one CPU free: enough for small, but big came first
    time.sleep(0.3)
    assert small.state == "queued" and big.state == "queued"
    holder.release()
    assert big.wait(timeout_s=30).ok and small.wait(timeout_s=30).ok
    (big_start, big_end), (small_start, _) = _intervals([tmp_path / "big", tmp_path / "small"])
    assert big_start < small_start and small_start >= big_end


def test_killed_job_frees_its_slot(tmp_path):
    backend = _backend(tmp_path, cpu_budget=1)
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    first = submit(str(sleeper), backend=backend)
    wait_for_output(first, "up")
    second = submit(_stamp_script(tmp_path), [str(tmp_path / "out"), "0"], backend=backend)
    wait_for_output(second, "queued")
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait(timeout_s=30).returncode == -signal.SIGKILL
    assert second.wait(timeout_s=30).ok


def test_slot_held_by_a_killed_process_is_freed(tmp_path):
    """The lock goes with its holder: SIGKILL of another process frees its slots."""
    pool = SlotPool(tmp_path / "slots", 1, poll_s=0.05)
    code = (
        "import sys, time\nfrom pathlib import Path\nfrom coursehub.runner.slots import SlotPool\n"
        "lease = SlotPool(Path(sys.argv[1]), 1).acquire(1)\nprint('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "slots")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(AdmissionCancelledError):
            import threading

            cancelled = threading.Event()
            threading.Timer(0.3, cancelled.set).start()
            pool.acquire(1, cancelled=cancelled)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]
    lease = pool.acquire(1)
    lease.release()


def test_slots_directory_is_shared_mode_1777(tmp_path):
    pool = SlotPool(tmp_path / "slots", 1)
    pool.acquire(1).release()
    assert (tmp_path / "slots").stat().st_mode & 0o7777 == 0o1777
    assert (tmp_path / "slots" / "cpu-0.slot").stat().st_mode & 0o777 == 0o666


def test_gpu_slots_pick_least_loaded_and_cap_jobs_per_gpu(tmp_path):
    pool = SlotPool(tmp_path / "slots", 4, gpu_count=2, gpu_jobs=2, poll_s=0.05)
    first = pool.acquire(1, gpus=1)
    second = pool.acquire(1, gpus=1)
    assert {first.gpu_indices, second.gpu_indices} == {(0,), (1,)}
    both = pool.acquire(1, gpus=2)
    assert both.gpu_indices == (0, 1)
    assert pool._try_take(1, 1) is None  # two jobs on each GPU already
    for lease in (first, second, both):
        lease.release()


def test_describe_queue():
    assert describe_queue(2) == "queued: 2 jobs ahead"
    assert describe_queue(1) == "queued: 1 job ahead"


def test_cancel_while_queued_withdraws_the_job(tmp_path):
    backend, stamp = _backend(tmp_path), _stamp_script(tmp_path)
    holder = backend.slots.acquire(2)
    try:
        job = submit(stamp, [str(tmp_path / "out"), "0"], backend=backend)
        wait_for_output(job, "queued")
        job.cancel()
        result = job.wait(timeout_s=30)
    finally:
        holder.release()
    assert result.killed_reason == "cancelled while queued" and job.pid is None
    assert not (tmp_path / "out").exists()
    assert not list((tmp_path / "slots" / "tickets").iterdir())
