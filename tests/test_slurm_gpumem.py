"""A Slurm runner job's GPU memory budget: in its batch script, told to its frameworks, kept.

The node's side (:func:`coursehub.runner.slurm.allocation.supervise`) runs
here with the fake NVML of ``test_runner_gpumem`` (one 16 GiB GPU whose
processes are this test's descendants); a real GPU is checked by
``benchmarks/gpu_checks.py``.
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from types import SimpleNamespace

from coursehub.runner.slurm.allocation import supervise, visible_gpu_total
from coursehub.runner.slurm.plan import SlurmPlacement, render_batch_script
from test_runner_gpumem import GIB, JOB_BYTES, FakeNvml
from test_slurm_render import GPU_TRAIN, OUT, USAGE

#: A job that writes what its frameworks were told, then sleeps ``argv[2]`` seconds.
HOG = """
    import os, sys, time
    open(sys.argv[1], "w").write(os.environ.get("COURSEHUB_GPU_MEM_FRACTION", "none"))
    time.sleep(float(sys.argv[2]))
"""


def test_the_batch_script_passes_the_budget_to_the_node():
    spec = dataclasses.replace(
        GPU_TRAIN, resources=dataclasses.replace(GPU_TRAIN.resources, gpu_mem_limit=JOB_BYTES)
    )
    script = render_batch_script(spec, SlurmPlacement(), OUT, USAGE, "/usr/bin/python3")
    assert f" --gpus --gpu-mem {JOB_BYTES} -- " in script
    plain = render_batch_script(GPU_TRAIN, SlurmPlacement(), OUT, USAGE, "/usr/bin/python3")
    assert "--gpu-mem" not in plain  # no budget declared: none enforced on the node


def test_the_budget_is_told_from_the_smallest_of_the_jobs_gpus():
    gpus = [
        SimpleNamespace(index=0, uuid="GPU-a", mem_total_bytes=80 * GIB),
        SimpleNamespace(index=1, uuid="GPU-b", mem_total_bytes=16 * GIB),
    ]
    assert visible_gpu_total(gpus, "0") == 80 * GIB
    assert visible_gpu_total(gpus, "GPU-b") == 16 * GIB
    assert visible_gpu_total(gpus, None) == 16 * GIB
    assert visible_gpu_total([], "0") is None


def test_a_job_over_its_budget_is_stopped_on_the_node_and_one_under_it_runs(tmp_path):
    script = tmp_path / "hog.py"
    script.write_text(textwrap.dedent(HOG))
    told = tmp_path / "told.txt"
    nvml = FakeNvml(hog_bytes=2 * GIB, small_bytes=GIB // 2)
    over = supervise(
        [sys.executable, str(script), str(told), "60"], None, 1.0, True, GIB, nvml=nvml
    )
    assert over["killed_reason"] == "exceeded its GPU memory budget of 1.0 GiB (peak 2.0 GiB)"
    assert over["elapsed_s"] < 10 and over["returncode"] != 0
    under = supervise(
        [sys.executable, str(script), str(told), "0.3"], None, 1.0, True, 3 * GIB, nvml=nvml
    )
    assert under["killed_reason"] is None and under["returncode"] == 0
    assert under["gpu_peak_bytes"] == 2 * GIB
    # the allocator's part of 3 GiB (less the context's 512 MiB) of the fake's 16 GiB
    assert told.read_text() == f"{2.5 / 16:.4f}"
