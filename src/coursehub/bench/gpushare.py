"""``coursehub bench gpu``: 1, 5, 10 students training the pendulum LSTM on one GPU.

For each number of students N (``--users``, default ``1,5,10``), N jobs
train at once on GPU 0 through the runner, each with its GPU memory budget
(``--gpu-mem``; admission by memory and job count,
:mod:`coursehub.runner.slots`). Reported per N: the median training time per
student and its ratio to one student alone, the largest GPU memory one job
held (NVML's per-process figure, CUDA context included), and, after each
job's exit, the seconds until the GPU's memory that no live process holds
was back to its level before the run (:func:`unowned_bytes`, polled every
:data:`POLL_S`, given up after :data:`RETURN_TIMEOUT_S`).

The naive case (``--naive``, on by default) runs N plain interpreters that
train the same steps and then stay alive, as a notebook kernel does after
its cell has run: the GPU memory they still hold once all have trained is
what a class of kernels keeps (PyTorch's caching allocator keeps freed
blocks and the context lives until the process ends: PyTorch docs, "CUDA
semantics", memory management).

Without a GPU seen by NVML, or a torch without CUDA, it refuses with one line
(:func:`plan_gpu_bench`); the figures exist only where it has run on a GPU.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil

from coursehub.bench.contention import ensure_dataset, run_managed
from coursehub.bench.gpu import RELEASE_TOLERANCE_BYTES, torch_has_cuda
from coursehub.bench.naive import plan_naive_env
from coursehub.bench.scenarios import Scenario
from coursehub.bench.students import BenchSettings, plan_workload_args, read_report
from coursehub.errors import CoursehubError
from coursehub.resources.gpus import GpuInfo, gpu_inventory
from coursehub.resources.units import describe_mem

#: Seconds between two readings of the GPU's used memory after an exit.
POLL_S = 0.05
#: Seconds after an exit when the memory is given up on as not returned.
RETURN_TIMEOUT_S = 30.0
#: The target: memory back within this many seconds of each exit.
RETURN_TARGET_S = 5.0


@dataclass
class ShareRow:
    """N students at once on the GPU (seconds and bytes)."""

    n_students: int
    train_s: list[float | None] = field(default_factory=list)
    peak_bytes: list[int | None] = field(default_factory=list)
    return_s: list[float | None] = field(default_factory=list)
    failed: int = 0


@dataclass
class KernelsRow:
    """N long-lived interpreters (the naive case): training time and memory kept after it."""

    n_students: int
    train_s: list[float | None] = field(default_factory=list)
    kept_bytes: int = 0


def plan_gpu_bench(inventory: list[GpuInfo], cuda_in_torch: bool) -> GpuInfo:
    """Return the GPU to measure on (NVML index 0's), or refuse.

    Raises
    ------
    CoursehubError
        One line: no GPU seen by NVML, or a torch without CUDA.
    """
    if not inventory:
        raise CoursehubError(
            "bench gpu: no GPU here (NVML sees no device, driver or pynvml); nothing measured"
        )
    if not cuda_in_torch:
        raise CoursehubError("bench gpu: NVML sees a GPU but this torch has no CUDA")
    return inventory[0]


def used_bytes(index: int) -> int:
    """Return the used memory of GPU ``index`` now, bytes (NVML ``nvmlDeviceGetMemoryInfo``)."""
    return next((g.mem_used_bytes for g in gpu_inventory() if g.index == index), 0)


def unowned_bytes(index: int) -> int | None:
    """Return the used memory of GPU ``index`` that no live process holds, bytes.

    The GPU's used memory less the ``usedGpuMemory`` of its compute processes
    (NVML ``nvmlDeviceGetComputeRunningProcesses``); None while NVML still
    lists a process that has exited (its context is being torn down). Pids
    are those of the PID namespace the driver sees: run on the host.
    """
    gpu = next((g for g in gpu_inventory() if g.index == index), None)
    if gpu is None:
        return 0
    if any(not psutil.pid_exists(p.pid) for p in gpu.processes):
        return None
    return gpu.mem_used_bytes - sum(p.used_mem_bytes for p in gpu.processes)


def wait_for_return(
    index: int, idle_bytes: int, timeout_s: float = RETURN_TIMEOUT_S
) -> float | None:
    """Return the seconds until GPU ``index`` holds no more unowned memory than ``idle_bytes``.

    ``idle_bytes``: :func:`unowned_bytes` before the run. None past ``timeout_s``.
    """
    started = time.monotonic()
    while time.monotonic() - started <= timeout_s:
        unowned = unowned_bytes(index)
        if unowned is not None and unowned <= idle_bytes + RELEASE_TOLERANCE_BYTES:
            return time.monotonic() - started
        time.sleep(POLL_S)
    return None


def run_share(n: int, gpu: GpuInfo, data: Path, settings: BenchSettings, work: Path) -> ShareRow:
    """Train ``n`` students at once on ``gpu`` through the runner; time each memory return.

    A return is timed from when the runner has reaped the student's job to
    when the memory no live process holds is back to its level before the run.
    """
    idle = unowned_bytes(gpu.index) or 0
    returns: dict[int, float | None] = {}

    def on_exit(student: int) -> None:
        returns[student] = wait_for_return(gpu.index, idle)

    scenario = Scenario("gpu", n, 1.0, 1)
    result = run_managed(scenario, data, replace(settings, device="cuda"), work, on_exit=on_exit)
    return ShareRow(
        n,
        [s.train_s for s in result.students],
        [s.gpu_peak_bytes for s in result.students],
        [returns.get(i) for i in range(n)],
        sum(1 for s in result.students if s.returncode != 0 or s.train_s is None),
    )


def run_kernels(
    n: int, gpu: GpuInfo, data: Path, settings: BenchSettings, work: Path
) -> KernelsRow:
    """Train ``n`` plain interpreters that stay alive after training; measure what they keep."""
    args = plan_workload_args(data, replace(settings, device="cuda"))
    code = (
        "import sys, time\nfrom coursehub.bench.workload import main\n"
        "main(sys.argv[1:])\nprint('trained', flush=True)\ntime.sleep(3600)\n"
    )
    env = {**plan_naive_env(os.environ), "CUDA_VISIBLE_DEVICES": str(gpu.index)}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    baseline = used_bytes(gpu.index)
    logs = [work / f"kernel-{n}-{i}.log" for i in range(n)]
    procs = []
    for log in logs:
        with open(log, "wb") as out:
            argv = [sys.executable, "-c", code, *args]
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + (settings.timeout_s or 3600)
        while not all("trained" in log.read_text(errors="replace") for log in logs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                break
            time.sleep(0.2)
        kept = max(0, used_bytes(gpu.index) - baseline)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    reports = [read_report(log.read_text(errors="replace")) for log in logs]
    return KernelsRow(n, [r.train_s if r else None for r in reports], kept)


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def render_gpu_bench(gpu: GpuInfo, rows: list[ShareRow], kernels: list[KernelsRow]) -> str:
    """Return the table of ``coursehub bench gpu`` and its targets' lines."""
    alone = _median(rows[0].train_s) if rows else None
    lines = [
        f"GPU {gpu.index} ({gpu.name}, {describe_mem(gpu.mem_total_bytes)}): pendulum LSTM "
        "through the runner, one job per student",
        f"{'students':>8} {'train s':>9} {'x alone':>8} {'GPU mem/job':>12} "
        f"{'back in (max)':>14} {'failed':>6}",
    ]
    for row in rows:
        median = _median(row.train_s)
        ratio = f"{median / alone:.2f}" if median and alone else "-"
        peak = max((p for p in row.peak_bytes if p is not None), default=None)
        back = [r for r in row.return_s if r is not None]
        never = len(row.return_s) - len(back)
        back_text = f"{max(back):.2f} s" if back else "-"
        back_text += f" ({never} never)" if never else ""
        train_text = f"{median:.1f}" if median is not None else "-"
        mem_text = describe_mem(peak) if peak is not None else "-"
        lines.append(
            f"{row.n_students:>8} {train_text:>9} {ratio:>8} {mem_text:>12} "
            f"{back_text:>14} {row.failed:>6}"
        )
    for kernel in kernels:
        median = _median(kernel.train_s)
        lines.append(
            f"naive, {kernel.n_students} kernels kept alive: train "
            f"{'-' if median is None else f'{median:.1f} s'} each, GPU memory still held "
            f"after training {describe_mem(kernel.kept_bytes)} (until the kernels stop)"
        )
    lines.extend(render_targets(rows, alone))
    return "\n".join(lines)


def render_targets(rows: list[ShareRow], alone: float | None) -> list[str]:
    """Return the target lines: the largest N at most 1.5x alone; memory back within 5 s."""
    if not rows or alone is None:
        return ["targets: not judged (no student alone finished)"]
    top = rows[-1]
    median = _median(top.train_s)
    ratio = median / alone if median else None
    returns = [r for row in rows for r in row.return_s]
    worst = max((r for r in returns if r is not None), default=None)
    all_back = all(r is not None and r <= RETURN_TARGET_S for r in returns)
    return [
        f"target: {top.n_students} students at most 1.5x alone: "
        + (
            "not measured"
            if ratio is None
            else f"{ratio:.2f}x, {'met' if ratio <= 1.5 else 'NOT met'}"
        ),
        f"target: memory back within {RETURN_TARGET_S:g} s of each exit: "
        + (f"worst {worst:.2f} s, " if worst is not None else "")
        + ("met" if all_back else "NOT met"),
    ]


def run_gpu_bench(
    users: list[int], settings: BenchSettings, work: Path, naive: bool = True
) -> tuple[GpuInfo, list[ShareRow], list[KernelsRow]]:
    """Refuse without a GPU, else run every N of ``users`` (and the naive case); return rows."""
    gpu = plan_gpu_bench(gpu_inventory(), torch_has_cuda())
    data = ensure_dataset(work / "pendulum-bench.npz")
    rows = [run_share(n, gpu, data, settings, work) for n in users]
    kernels = [run_kernels(max(users), gpu, data, settings, work)] if naive else []
    return gpu, rows, kernels
