"""GPU check of the contention benchmark: N students on one GPU, memory per process, release.

With a CUDA device, N students train at once on GPU 0 through the runner
(one GPU slot each, all on that GPU). Reported: the GPU memory each student's
process held at its peak (the runner's NVML samples,
``nvmlDeviceGetComputeRunningProcesses``, CUDA context included: it alone
takes some hundreds of MB), the GPU's used memory after each exit, and
whether it came back to its level before the run once the last student had
exited (only process exit frees a CUDA context; ``torch.cuda.empty_cache``
frees cached blocks only: PyTorch docs, "CUDA semantics"; hence the fresh
interpreter). Without a GPU, or with a torch build that has no CUDA, the
check is skipped with a message (:func:`plan_gpu_check`).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from coursehub.bench.contention import run_managed
from coursehub.bench.scenarios import Scenario
from coursehub.bench.students import BenchSettings
from coursehub.resources.gpus import GpuInfo, gpu_inventory
from coursehub.resources.units import describe_mem

#: Used memory above the level before the run still counted as "returned", bytes.
RELEASE_TOLERANCE_BYTES = 64 * 1024**2


@dataclass(frozen=True)
class GpuPlan:
    """The GPU check to run: ``n_students`` on the GPU of NVML index ``index``."""

    index: int
    name: str
    n_students: int


@dataclass(frozen=True)
class ExitSample:
    """GPU used memory (bytes) right after a student exited, and who was still running."""

    student: int
    mem_used_bytes: int
    still_running: tuple[int, ...]


@dataclass
class GpuCheck:
    """Result of the GPU check (all memory in bytes)."""

    plan: GpuPlan
    baseline_bytes: int
    peak_bytes: list[int | None] = field(default_factory=list)
    exits: list[ExitSample] = field(default_factory=list)
    final_bytes: int = 0
    released_each: list[bool] = field(default_factory=list)
    released: bool = False
    failed: int = 0


def plan_gpu_check(
    inventory: list[GpuInfo], cuda_in_torch: bool, n_students: int, enabled: bool = True
) -> tuple[GpuPlan | None, str]:
    """Decide whether to run the GPU check; return the plan (None: skip) and a line saying why."""
    if not enabled:
        return None, "GPU check: not asked for (--no-gpu)"
    if not inventory:
        return None, "GPU check skipped: no GPU seen by NVML (no device, driver or pynvml)"
    if not cuda_in_torch:
        return None, "GPU check skipped: NVML sees a GPU but this torch build has no CUDA"
    gpu = inventory[0]
    plan = GpuPlan(gpu.index, gpu.name, n_students)
    return plan, f"GPU check: {n_students} students at once on GPU {gpu.index} ({gpu.name})"


def judge_release(
    baseline_bytes: int,
    exits: list[ExitSample],
    peak_bytes: list[int | None],
    tolerance_bytes: int = RELEASE_TOLERANCE_BYTES,
) -> list[bool]:
    """Return, for each exit, whether the used memory was back to baseline + what still ran.

    After an exit the GPU may hold at most the level before the run, plus
    the peaks of the students still running, plus ``tolerance_bytes``: the
    exited student's memory (context included) must be gone.
    """
    verdicts = []
    for sample in exits:
        running = sum(peak_bytes[i] or 0 for i in sample.still_running)
        verdicts.append(sample.mem_used_bytes <= baseline_bytes + running + tolerance_bytes)
    return verdicts


def torch_has_cuda() -> bool:
    """Return True if torch sees a CUDA device (asked in a child; this process never loads it)."""
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([sys.executable, "-c", probe], timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _mem_used(index: int) -> int:
    gpus = [g for g in gpu_inventory() if g.index == index]
    return gpus[0].mem_used_bytes if gpus else 0


def run_gpu_check(
    plan: GpuPlan, data: Path, settings: BenchSettings, cpu_limit: float, work: Path
) -> GpuCheck:
    """Train ``plan.n_students`` students at once on the GPU; sample its memory after each exit."""
    check = GpuCheck(plan, baseline_bytes=_mem_used(plan.index))
    running = set(range(plan.n_students))

    def sample(student: int) -> None:
        running.discard(student)
        check.exits.append(ExitSample(student, _mem_used(plan.index), tuple(sorted(running))))

    n_threads = max(1, int(cpu_limit))
    scenario = Scenario("gpu", plan.n_students, cpu_limit, n_threads)
    result = run_managed(scenario, data, replace(settings, device="cuda"), work, on_exit=sample)
    check.peak_bytes = [s.gpu_peak_bytes for s in result.students]
    check.final_bytes = _mem_used(plan.index)
    check.released_each = judge_release(check.baseline_bytes, check.exits, check.peak_bytes)
    check.released = check.final_bytes <= check.baseline_bytes + RELEASE_TOLERANCE_BYTES
    check.failed = sum(1 for s in result.students if s.returncode != 0 or s.train_s is None)
    return check


def render_gpu_check(check: GpuCheck) -> str:
    """Return the lines printed after the table for the GPU check."""
    peaks = ", ".join("-" if p is None else describe_mem(p) for p in check.peak_bytes)
    lines = [
        f"GPU {check.plan.index} ({check.plan.name}): {check.plan.n_students} students, "
        f"memory per process at peak: {peaks}",
        f"GPU used memory before {describe_mem(check.baseline_bytes)}, after each exit: "
        + ", ".join(describe_mem(e.mem_used_bytes) for e in check.exits),
        f"GPU memory back to the level before the run after the last exit: "
        f"{'yes' if check.released else 'NO'} ({describe_mem(check.final_bytes)}); "
        f"freed at each exit: {'yes' if all(check.released_each) else 'NO'}",
    ]
    if check.failed:
        lines.append(f"GPU check: {check.failed} student(s) failed")
    return "\n".join(lines)
