"""``%coursehub_run`` through a real IPython shell."""

from __future__ import annotations

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture
def shell(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COURSEHUB_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSEHUB_CPU_BUDGET", "2")
    monkeypatch.chdir(tmp_path)
    ipython = InteractiveShell.instance()
    ipython.run_line_magic("load_ext", "coursehub.runner.magic")
    yield ipython
    InteractiveShell.clear_instance()


def test_magic_streams_output_and_ends_with_summary(shell, tmp_path, capsys):
    (tmp_path / "train.py").write_text(
        "import os, sys\nprint('epochs', sys.argv[2], os.environ['OMP_NUM_THREADS'])\n"
    )
    shell.run_line_magic("coursehub_run", "--threads 2 train.py model.pt 100")
    out = capsys.readouterr().out
    assert "epochs 100 2" in out
    assert out.rstrip().splitlines()[-1].startswith("[coursehub] exit 0 | elapsed")
    assert shell.user_ns["coursehub_last_run"].ok


def test_magic_bad_input_is_one_line(shell, tmp_path, capsys):
    shell.run_line_magic("coursehub_run", "--threads 0 train.py")
    shell.run_line_magic("coursehub_run", "--bogus x.py")
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "coursehub: error: --threads must be a positive integer, got '0'"
    assert err[1].startswith("coursehub: error: unrecognized arguments: --bogus")
    assert "coursehub_last_run" not in shell.user_ns
    assert not (tmp_path / "runs").exists()
