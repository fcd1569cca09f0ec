"""``coursehub bench gpu``: its refusal without a GPU, its table, and a tiny run on a GPU."""

from __future__ import annotations

import pytest

from coursehub.bench.gpushare import (
    KernelsRow,
    ShareRow,
    plan_gpu_bench,
    render_gpu_bench,
)
from coursehub.cli import main
from coursehub.errors import CoursehubError
from coursehub.resources.gpus import GpuInfo, gpu_inventory

GIB = 1024**3
CARD = GpuInfo(0, "Fake 16G", "GPU-fake", 16 * GIB, 0, ())


def test_without_a_gpu_it_refuses_with_one_line():
    with pytest.raises(CoursehubError, match=r"^bench gpu: no GPU here"):
        plan_gpu_bench([], cuda_in_torch=False)
    with pytest.raises(CoursehubError, match="this torch has no CUDA"):
        plan_gpu_bench([CARD], cuda_in_torch=False)
    assert plan_gpu_bench([CARD], cuda_in_torch=True) is CARD


@pytest.mark.skipif(bool(gpu_inventory()), reason="this machine has a GPU")
def test_the_command_refuses_cleanly_here(capsys):
    assert main(["bench", "gpu", "--users", "1,2", "--steps", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "coursehub: error: bench gpu: no GPU here (NVML sees no device, driver or pynvml); "
        "nothing measured"
    ]


def test_the_table_gives_ratio_memory_return_and_targets():
    rows = [
        ShareRow(1, [10.0], [int(1.2 * GIB)], [0.3]),
        ShareRow(10, [12.0] * 9 + [14.0], [int(1.25 * GIB)] * 10, [0.4] * 9 + [None], 0),
    ]
    text = render_gpu_bench(CARD, rows, [KernelsRow(10, [11.0] * 10, 8 * GIB)])
    lines = text.splitlines()
    assert lines[0].startswith("GPU 0 (Fake 16G, 16.0 GiB)")
    assert lines[2].split() == ["1", "10.0", "1.00", "1.2", "GiB", "0.30", "s", "0"]
    assert lines[3].split() == [
        "10",
        "12.0",
        "1.20",
        "1.2",
        "GiB",
        "0.40",
        "s",
        "(1",
        "never)",
        "0",
    ]
    assert "naive, 10 kernels kept alive: train 11.0 s each, GPU memory still held" in text
    assert "8.0 GiB (until the kernels stop)" in text
    assert "target: 10 students at most 1.5x alone: 1.20x, met" in text
    assert "target: memory back within 5 s of each exit: worst 0.40 s, NOT met" in text


@pytest.mark.gpu
def test_a_tiny_gpu_bench_runs_on_a_gpu(tmp_path, capsys):
    if not gpu_inventory():
        pytest.skip("no NVIDIA GPU here")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    argv = ["bench", "gpu", "--users", "1,2", "--steps", "20", "--work-dir", str(tmp_path)]
    assert main([*argv, "--json", str(tmp_path / "gpu.json")]) == 0
    out = capsys.readouterr().out
    assert "target: 2 students at most 1.5x alone" in out
    assert "naive, 2 kernels kept alive" in out
