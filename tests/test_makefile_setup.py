"""Set-up on a fresh machine: the Makefile's torch switch and ``make system-deps``.

The pip and apt-get command lines are rendered by ``make -n`` (dry run) or
``DRY_RUN=1``: installing the multi-GB CUDA build of torch, or Debian
packages, is not something a test run does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path} if path else None
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def torch_install_line(tmp_path: Path, *args: str) -> str:
    """Return the pip line that installs torch in a fresh venv under ``tmp_path``."""
    done = make("-n", "-B", "setup", f"VENV={tmp_path / 'venv'}", *args)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if '"torch==' in line]
    assert lines, done.stdout
    return lines[0]


def test_setup_installs_the_cpu_build_of_torch_from_pytorchs_index_by_default(tmp_path):
    line = torch_install_line(tmp_path)
    assert f'pip install -q {CPU_INDEX} "torch==2.13.0"' in line
    assert "torch.version.cuda is None" in line


def test_setup_with_torch_cuda_installs_pypis_build_and_replaces_a_cpu_one(tmp_path):
    line = torch_install_line(tmp_path, "TORCH=cuda")
    assert "download.pytorch.org" not in line
    assert 'pip install -q  "torch==2.13.0"' in line
    assert "pip uninstall -q -y torch" in line
    assert "torch.version.cuda is not None" in line


def test_setup_installs_torch_before_the_extras_that_would_pull_pypis_build(tmp_path):
    done = make("-n", "-B", "setup", f"VENV={tmp_path / 'venv'}")
    lines = done.stdout.splitlines()
    torch_at = next(i for i, line in enumerate(lines) if '"torch==' in line)
    extras_at = next(i for i, line in enumerate(lines) if "[workload," in line)
    assert torch_at < extras_at


def test_an_unknown_torch_build_is_refused_with_the_choices(tmp_path):
    done = make("-n", "setup", "TORCH=gpu", f"VENV={tmp_path / 'venv'}")
    assert done.returncode != 0
    assert "TORCH must be cpu or cuda, got 'gpu'" in done.stderr


def test_make_demo_passes_its_options_to_coursehub_demo(tmp_path):
    done = make("-n", "demo", f"VENV={tmp_path / 'venv'}", "ARGS=--port 8100 --data-dir /srv/demo")
    assert done.stdout.splitlines()[-1].endswith("coursehub demo --port 8100 --data-dir /srv/demo")


def test_system_deps_installs_npm_only_when_nodejs_came_from_elsewhere(tmp_path):
    """A PATH with a node but no npm (e.g. a Node.js tarball): Debian's nodejs is not asked for."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "sh", "ls", "node"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (bin_dir / tool).symlink_to(found)
    done = make(
        "-s", "system-deps", "DRY_RUN=1", f"PYTHON={shutil.which('python3')}", path=str(bin_dir)
    )
    assert done.returncode == 0, done.stderr
    would = done.stdout.strip().splitlines()[-1]
    assert would.startswith("would run: apt-get install"), would
    assert " npm" in would and " git" in would and "nodejs" not in would
    assert " systemd-container" in would  # systemd-nspawn is not on that PATH
