"""The local cgroup spawner: cgroup per server, joined before exec, limits written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from coursehub.hub.cgroupspawner import CgroupSimpleLocalProcessSpawner, cgroup_name_for


def make_spawner(tmp_path: Path, cgroup_root: Path, proc_cgroup: Path):
    user = SimpleNamespace(name="p2501001", groups=[], url="/user/p2501001/")
    spawner = CgroupSimpleLocalProcessSpawner(
        user=user,
        name="",
        home_dir_template=str(tmp_path / "homes" / "{username}"),
        cgroup_root=str(cgroup_root),
        proc_cgroup=str(proc_cgroup),
    )
    spawner.cpu_limit, spawner.mem_limit = 2.0, 4 * 1024**3
    return spawner


def fake_v1_tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for controller in ("cpu", "memory"):
        (root / controller).mkdir(parents=True)
    proc = tmp_path / "proc_cgroup"
    proc.write_text("4:cpu:/\n5:memory:/\n")
    return root, proc


def test_cgroup_name_is_one_safe_path_component():
    assert cgroup_name_for("p2501001") == "jupyter-p2501001"
    assert cgroup_name_for("a/b c", "gpu") == "jupyter-a_b_c-gpu"


def test_server_joins_its_cgroup_with_the_profile_limits(tmp_path):
    root, proc = fake_v1_tree(tmp_path)
    spawner = make_spawner(tmp_path, root, proc)
    spawner._cgroup = spawner.ensure_cgroup()
    cpu_dir = root / "cpu" / "coursehub-servers" / "jupyter-p2501001"
    mem_dir = root / "memory" / "coursehub-servers" / "jupyter-p2501001"
    assert (cpu_dir / "cpu.cfs_quota_us").read_text() == "200000"
    assert (mem_dir / "memory.limit_in_bytes").read_text() == str(4 * 1024**3)
    child = subprocess.Popen(
        [sys.executable, "-c", "import os; print(os.getcwd())"],
        preexec_fn=spawner.make_preexec_fn("p2501001"),
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = child.communicate(timeout=30)
    assert (cpu_dir / "cgroup.procs").read_text() == str(child.pid)
    assert (mem_dir / "cgroup.procs").read_text() == str(child.pid)
    assert out.strip() == str(tmp_path / "homes" / "p2501001")


def test_without_writable_cgroups_the_server_starts_and_the_hub_says_so(tmp_path, caplog):
    spawner = make_spawner(tmp_path, tmp_path / "nothing", tmp_path / "no_proc_cgroup")
    caplog.set_level("WARNING")
    assert spawner.ensure_cgroup() is None
    assert "NOT enforced" in caplog.text
    spawner._cgroup = None
    child = subprocess.run(
        [sys.executable, "-c", "pass"], preexec_fn=spawner.make_preexec_fn("p2501001"), check=False
    )
    assert child.returncode == 0
    spawner.remove_cgroup()


def test_allow_root_is_passed_only_as_root(tmp_path, monkeypatch):
    spawner = make_spawner(tmp_path, tmp_path, tmp_path)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert "--allow-root" in spawner.get_args()
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert "--allow-root" not in spawner.get_args()
