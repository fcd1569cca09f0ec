"""The teaching notebook: one copy in the package, run end to end through the runner."""

from importlib import resources
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from coursehub.demo.seed import NOTEBOOK_FILE, ensure_notebook

NOTEBOOK = Path(str(resources.files("coursehub.pendulum") / "notebooks" / NOTEBOOK_FILE))
EXAMPLE = Path(__file__).parents[1] / "examples" / "pendulum" / NOTEBOOK_FILE
TINY = {
    "PENDULUM_N_TRAJECTORIES": "20",
    "PENDULUM_DURATION_S": "11",  # DP-Buffat-v2 forecasts 10 s from 10 samples
    "PENDULUM_EPOCHS": "1",
    "PENDULUM_THREADS": "1",
    "PENDULUM_MAX_WINDOWS": "300",
}


def test_example_is_a_relative_link_to_the_package_copy():
    assert EXAMPLE.is_symlink()
    assert not Path(EXAMPLE.readlink()).is_absolute()
    assert EXAMPLE.resolve() == NOTEBOOK.resolve()


def test_demo_copies_the_package_notebook(tmp_path):
    copied = ensure_notebook(tmp_path / "home")
    assert copied == tmp_path / "home" / NOTEBOOK_FILE
    assert copied.read_bytes() == NOTEBOOK.read_bytes()


def test_notebook_trains_through_the_runner_magic():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    assert "%load_ext coursehub.runner.magic" in code
    assert "%coursehub_run --threads {N_THREADS}" in code
    assert "-m coursehub.pendulum.train" in code
    assert not any(line.startswith("!") for line in code.splitlines())


@pytest.mark.slow
def test_notebook_runs_at_tiny_size(tmp_path, monkeypatch):
    for name, value in TINY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PENDULUM_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("COURSEHUB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COURSEHUB_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSEHUB_CPU_BUDGET", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "samples/s" in text and "ridge_ar10" in text
    assert "[coursehub] exit 0 | elapsed " in text and " | 1 thread | peak RSS " in text
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert (tmp_path / "work" / "model.pt").is_file()
    (log,) = (tmp_path / "runs").glob("*-pendulum-train-*.log")
    assert "samples/s" in log.read_text()
