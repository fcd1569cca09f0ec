"""Each server's Jupyter runtime folder outside its home, per spawner kind (unit level)."""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
from types import SimpleNamespace

import pytest

from coursehub.demo import seed
from coursehub.errors import UsageError
from coursehub.spawn.coursespaces import CourseSpaces
from coursehub.spawn.runtimedir import (
    RUNTIME_VAR,
    SLURM_MARK,
    ServerRuntime,
    ensure_ipython_dir,
    make_runtime_dir,
    render_slurm_lines,
)
from helpers import local_spawner
from loopfs import fill

HUB = "hubtest1"


def local(tmp_path):
    spawner = local_spawner(home=tmp_path / "homes")
    hook = ServerRuntime("local", hub_id=HUB, runtime_dir=str(tmp_path / "run"))
    return spawner, hook


def test_a_local_server_gets_a_private_runtime_folder_outside_its_home(tmp_path):
    spawner, hook = local(tmp_path)
    hook(spawner)
    path = tmp_path / "run" / f"servers-{HUB}" / "jupyter-alice"
    assert spawner.environment[RUNTIME_VAR] == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert path.stat().st_uid == os.geteuid()
    assert not str(path).startswith(spawner.home_dir)


def test_a_named_server_has_its_own_runtime_folder(tmp_path):
    _, hook = local(tmp_path)
    spawner = SimpleNamespace(
        user=SimpleNamespace(name="alice"),
        name="gpu",
        home_dir_template=str(tmp_path / "homes" / "{username}"),
        environment={},
        log=logging.getLogger("test"),
        _log_name="alice:gpu",
    )
    hook(spawner)
    assert spawner.environment[RUNTIME_VAR].endswith(f"/servers-{HUB}/jupyter-alice-gpu")


def test_a_start_empties_what_a_dead_server_left_and_a_stop_removes_the_folder(tmp_path):
    spawner, hook = local(tmp_path)
    hook(spawner)
    path = hook.server_dir(spawner)
    (path / "jpserver-123.json").write_text("{}")
    (path / "outside").symlink_to(tmp_path)  # never followed on removal
    hook(spawner)
    assert list(path.iterdir()) == []
    (path / "kernel-1.json").write_text("{}")
    hook.release(spawner)
    assert not path.exists()
    assert tmp_path.is_dir()


def test_a_runtime_root_made_by_someone_else_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: chown to another user")
    parent = tmp_path / "servers"
    parent.mkdir()
    os.chown(parent, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to another user"):
        make_runtime_dir(parent / "jupyter-alice", 0, 0)


def test_a_systemd_server_uses_its_units_runtime_directory():
    spawner = SimpleNamespace(
        user=SimpleNamespace(name="alice"),
        name="",
        environment={"A": "1"},
        unit_extra_properties={"CPUQuota": "200%"},
        log=logging.getLogger("test"),
        _log_name="alice",
    )
    ServerRuntime("systemd", hub_id=HUB)(spawner)
    assert spawner.unit_extra_properties == {
        "CPUQuota": "200%",
        "RuntimeDirectory": f"coursehub-runtime/{HUB}-jupyter-alice",
        "RuntimeDirectoryMode": "0700",
    }
    assert spawner.environment == {
        "A": "1",
        RUNTIME_VAR: f"/run/coursehub-runtime/{HUB}-jupyter-alice",
    }


def test_a_slurm_job_makes_and_removes_its_runtime_folder_once_per_start():
    spawner = SimpleNamespace(
        user=SimpleNamespace(name="alice"),
        name="",
        req_prologue="module load python",
        req_epilogue="echo done",
        log=logging.getLogger("test"),
        _log_name="alice",
    )
    hook = ServerRuntime("slurm", hub_id=HUB)
    hook(spawner)
    hook(spawner)  # a second start adds nothing twice
    prologue, epilogue = spawner.req_prologue.splitlines(), spawner.req_epilogue.splitlines()
    assert prologue[0] == "module load python" and len(prologue) == 2
    assert prologue[1].startswith(f'export {RUNTIME_VAR}="$(mktemp -d')
    assert epilogue == [f'rm -rf -- "${RUNTIME_VAR}"  {SLURM_MARK}', "echo done"]


def test_slurm_lines_without_an_admin_prologue_are_only_this_hooks():
    prologue, epilogue = render_slurm_lines("", "")
    assert prologue.endswith(SLURM_MARK) and "\n" not in prologue
    assert epilogue.endswith(SLURM_MARK) and "\n" not in epilogue


def test_an_unknown_kind_is_refused():
    with pytest.raises(UsageError, match="unknown spawner kind"):
        ServerRuntime("docker")


def fail_half_way(code):
    def copy(source, target):
        with open(target, "w") as handle:
            handle.write('{"cells": [')
        raise OSError(code, os.strerror(code))

    return copy


def test_a_full_home_gets_no_notebook_and_no_truncated_copy(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(seed.shutil, "copyfile", fail_half_way(errno.ENOSPC))
    spawner = local_spawner(home=tmp_path / "homes")
    with caplog.at_level(logging.WARNING):
        seed.copy_notebook_hook(spawner)
    home = tmp_path / "homes" / "alice"
    assert list(home.iterdir()) == []
    assert f"home {home} is full" in caplog.text and seed.NOTEBOOK_FILE in caplog.text


def test_a_home_that_refuses_the_copy_for_another_reason_stops_the_spawn(tmp_path, monkeypatch):
    monkeypatch.setattr(seed.shutil, "copyfile", fail_half_way(errno.EACCES))
    with pytest.raises(PermissionError):
        seed.copy_notebook_hook(local_spawner(home=tmp_path / "homes"))


def test_a_home_with_room_gets_the_notebook(tmp_path):
    spawner = local_spawner(home=tmp_path / "homes")
    seed.copy_notebook_hook(spawner)
    copied = tmp_path / "homes" / "alice" / seed.NOTEBOOK_FILE
    assert copied.read_bytes().startswith(b"{")
    assert [p.name for p in copied.parent.iterdir()] == [seed.NOTEBOOK_FILE]


def test_course_data_links_on_a_full_home_are_skipped(tmp_path, monkeypatch, caplog):
    def full(*args, **kwargs):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr("coursehub.spawn.coursespaces.apply_data_links", full)
    spawner = local_spawner(["nbgrader-a-2025"], home=tmp_path / "homes")
    with caplog.at_level(logging.WARNING):
        CourseSpaces("local", root=str(tmp_path / "shared"))(spawner)
    assert "home is full" in caplog.text
    assert spawner.environment["JUPYTER_PATH"]


def test_a_new_ipython_folder_comes_with_jupyters_migration_marker(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert ensure_ipython_dir(str(home), os.geteuid(), os.getegid())
    assert (home / ".ipython").is_dir()
    assert (home / ".jupyter" / "migrated").read_text().startswith("20")


@pytest.mark.root
def test_a_home_that_takes_folders_but_no_data_gets_neither(tmp_path):
    """A full tmpfs: mkdir works, a write fails; the server must not migrate a new ~/.ipython."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(home)], check=True)
    try:
        fill(home)
        before = sorted(p.name for p in home.iterdir())
        assert not ensure_ipython_dir(str(home), os.geteuid(), os.getegid())
        assert sorted(p.name for p in home.iterdir()) == before
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)
