"""The GPU figures of sharing one GPU with a class, in one run (needs an NVIDIA GPU).

Prints, each on its own line:

1. the GPU (NVML), torch's version and whether it sees CUDA;
2. ``budget:`` a runner job with ``--gpu-mem 1G`` that lifts PyTorch's cap
   (``torch.cuda.set_per_process_memory_fraction(1.0)``, which any script may
   call) and takes 3 GiB: the runner's line (``killed: exceeded its GPU memory
   budget of 1.0 GiB (peak ...)``) and the seconds from the moment it started
   to allocate to the moment the runner had stopped it (target: 2 s);
3. ``coursehub bench gpu --users 1,5,10 --gpu-mem 2G``: per N, the training time per
   student and its ratio to one alone (target for 10: at most 1.5x), the GPU
   memory per job, the seconds until the memory came back after each exit
   (target: 5 s), the naive case (10 kernels kept alive) and the target lines.

Run: ``.venv/bin/python benchmarks/gpu_checks.py [STEPS]`` (default 500 steps
per student; a few minutes on a recent GPU, well under 8). Without a GPU it
says so in one line and exits 1. Everything runs in a temporary folder (its
own runs and slots directories).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from coursehub.resources.gpus import gpu_inventory
from coursehub.resources.units import describe_mem

STEPS = 500
BUDGET = "1G"
#: Budget of each student in the sharing benchmark: room above a pendulum job's
#: 1.25 GB (the talk's A40 figure) for a larger context on a newer GPU; the
#: table prints what each job really held.
GPU_MEM = "2G"
#: Seconds within which a job over its budget must be stopped, and memory must come back.
STOP_TARGET_S = 2.0

HOG = """
    import sys, time, torch
    torch.cuda.set_per_process_memory_fraction(1.0)  # a script may lift the cap
    torch.zeros(1, device="cuda")  # the CUDA context first
    print("allocating", time.time(), flush=True)
    x = torch.ones(3 * 1024**3 // 4, device="cuda")  # 3 GiB of float32
    torch.cuda.synchronize()
    print("allocated", time.time(), flush=True)
    time.sleep(60)
"""


def check_budget(work: Path) -> None:
    """Run the hog through the runner; print the runner's line and the stop latency."""
    from coursehub.runner.api import submit
    from coursehub.runner.local import LocalBackend

    script = work / "hog.py"
    script.write_text(textwrap.dedent(HOG))
    lines = []
    job = submit(str(script), gpus=1, gpu_mem_limit=BUDGET, backend=LocalBackend(work / "runs"))
    result = job.wait(timeout_s=120)
    ended = time.time()
    over = [line for line in job.output().splitlines() if line.startswith("allocating ")]
    lines.append(f"budget: {result.killed_reason or f'NOT stopped (exit {result.returncode})'}")
    if over:
        latency = ended - float(over[0].split()[1])
        verdict = "met" if latency <= STOP_TARGET_S else "NOT met"
        lines.append(
            f"budget: stopped {latency:.2f} s after it started to allocate 3 GiB "
            f"(target {STOP_TARGET_S:g} s: {verdict})"
        )
    else:
        lines.append("budget: the job never reported its allocation; its output:")
        lines.append(job.output())
    print("\n".join(lines), flush=True)


def main(argv: list[str]) -> int:
    """Print every figure; return 0, or 1 without a GPU."""
    steps = int(argv[0]) if argv else STEPS
    gpus = gpu_inventory()
    if not gpus:
        print("gpu_checks: no GPU here (NVML sees no device, driver or pynvml)")
        return 1
    probe = "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"
    torch_line = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    ).stdout.strip()
    for gpu in gpus:
        print(
            f"GPU {gpu.index}: {gpu.name}, {describe_mem(gpu.mem_total_bytes)}, "
            f"used {describe_mem(gpu.mem_used_bytes)}"
        )
    print(f"torch, CUDA, available: {torch_line}", flush=True)
    with tempfile.TemporaryDirectory(prefix="coursehub-gpu-checks-") as folder:
        work = Path(folder)
        os.environ["COURSEHUB_SLOTS_DIR"] = str(work / "slots")
        os.environ["COURSEHUB_RUNS_DIR"] = str(work / "runs")
        started = time.monotonic()
        check_budget(work)
        bench = [sys.executable, "-m", "coursehub", "bench", "gpu", "--users", "1,5,10"]
        bench += ["--steps", str(steps), "--timeout", "5m", "--work-dir", str(work / "bench")]
        bench += ["--gpu-mem", GPU_MEM]
        bench += ["--json", str(work / "gpu.json")]
        status = subprocess.run(bench, check=False).returncode
        print(f"gpu_checks: done in {time.monotonic() - started:.0f} s (bench status {status})")
        print((work / "gpu.json").read_text() if (work / "gpu.json").exists() else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
