from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).parents[1] / "examples" / "pendulum" / "double_pendulum.ipynb"
TINY = {
    "PENDULUM_N_TRAJECTORIES": "20",
    "PENDULUM_DURATION_S": "5",
    "PENDULUM_EPOCHS": "1",
    "PENDULUM_THREADS": "1",
    "PENDULUM_MAX_WINDOWS": "300",
}


@pytest.mark.slow
def test_notebook_runs_at_tiny_size(tmp_path, monkeypatch):
    for name, value in TINY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PENDULUM_WORK_DIR", str(tmp_path / "work"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "samples/s" in text and "ridge_ar10" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert (tmp_path / "work" / "model.pt").is_file()
