"""The local cgroup spawner: a cgroup per server and hub, joined before exec, limits written,
other hubs' servers never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from tornado import web

from cgrouptree import remove_cgroup_tree
from coursehub.spawn.cgrouprecord import cgroup_name_for, servers_parent_for
from coursehub.spawn.cgroupspawner import CgroupSimpleLocalProcessSpawner
from coursehub.spawn.devices import nvidia_access
from coursehub.spawn.identity import HubIdentityError

NO_NVIDIA = "Character devices:\n  1 mem\n  5 /dev/tty\n136 pts\n\nBlock devices:\n  7 loop\n"
WITH_NVIDIA = NO_NVIDIA.replace("136 pts\n", "136 pts\n195 nvidia-frontend\n510 nvidia-uvm\n")


def make_spawner(tmp_path: Path, cgroup_root=None, proc_cgroup=None, **traits):
    user = SimpleNamespace(name=traits.pop("username", "p2501001"), groups=[], url="/user/x/")
    proc_devices = tmp_path / "proc_devices"
    if not proc_devices.exists():
        proc_devices.write_text(NO_NVIDIA)
    options = {
        "home_dir_template": str(tmp_path / "homes" / "{username}"),
        "runtime_dir": str(tmp_path / "run"),
        "proc_devices": str(proc_devices),
        "hub_id": "hubA",
        **traits,
    }
    if cgroup_root is not None:
        options.update(cgroup_root=str(cgroup_root), proc_cgroup=str(proc_cgroup))
    spawner = CgroupSimpleLocalProcessSpawner(user=user, name="", **options)
    spawner.cpu_limit, spawner.mem_limit = 2.0, 4 * 1024**3
    return spawner


def fake_v1_tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for controller in ("cpu", "memory"):
        (root / controller).mkdir(parents=True)
    proc = tmp_path / "proc_cgroup"
    proc.write_text("4:cpu:/\n5:memory:/\n")
    return root, proc


def start_in(spawner, *argv: str, output: bool = False) -> subprocess.Popen:
    """Start ``argv`` the way the spawner starts a server: joining its cgroups before exec."""
    return subprocess.Popen(
        list(argv),
        preexec_fn=spawner.make_preexec_fn(spawner.user.name),
        stdout=subprocess.PIPE if output else subprocess.DEVNULL,
        text=True,
    )


def test_cgroup_name_is_one_safe_path_component():
    assert cgroup_name_for("p2501001") == "jupyter-p2501001"
    assert cgroup_name_for("a/b c", "gpu") == "jupyter-a_b_c-gpu"


@pytest.mark.parametrize(
    ("parent", "hub_id", "expected"),
    [
        ("coursehub-servers", "3f2a9c01de", "coursehub-servers-3f2a9c01de"),
        ("site", "prod.1", "site-prod.1"),
    ],
)
def test_each_hub_has_its_own_directory_of_server_cgroups(parent, hub_id, expected):
    assert servers_parent_for(parent, hub_id) == expected


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "x" * 41])
def test_a_hub_id_that_cannot_be_a_path_component_is_refused(tmp_path, bad):
    with pytest.raises(HubIdentityError, match="hub id"):
        make_spawner(tmp_path, hub_id=bad)


def test_the_default_hub_id_follows_the_hubs_database(tmp_path):
    from traitlets.config import Config

    def hub_id_for(db_url: str) -> str:
        config = Config()
        config.JupyterHub.db_url = db_url
        user = SimpleNamespace(name="u", groups=[], url="/user/u/")
        return CgroupSimpleLocalProcessSpawner(user=user, config=config).hub_id

    assert hub_id_for("sqlite:////srv/a/jupyterhub.sqlite") != hub_id_for(
        "sqlite:////srv/b/jupyterhub.sqlite"
    )
    assert hub_id_for("sqlite:////srv/a/jupyterhub.sqlite") == hub_id_for(
        "sqlite:////srv/a/jupyterhub.sqlite"
    )


def test_server_joins_its_cgroup_with_the_profile_limits(tmp_path):
    root, proc = fake_v1_tree(tmp_path)
    spawner = make_spawner(tmp_path, root, proc)
    spawner._cgroup = spawner.ensure_cgroup()
    cpu_dir = root / "cpu" / "coursehub-servers-hubA" / "jupyter-p2501001"
    mem_dir = root / "memory" / "coursehub-servers-hubA" / "jupyter-p2501001"
    assert (cpu_dir / "cpu.cfs_quota_us").read_text() == "200000"
    assert (mem_dir / "memory.limit_in_bytes").read_text() == str(4 * 1024**3)
    child = start_in(spawner, sys.executable, "-c", "import os; print(os.getcwd())", output=True)
    out, _ = child.communicate(timeout=30)
    assert (cpu_dir / "cgroup.procs").read_text() == str(child.pid)
    assert (mem_dir / "cgroup.procs").read_text() == str(child.pid)
    assert out.strip() == str(tmp_path / "homes" / "p2501001")
    assert spawner.get_state()["coursehub_cgroup"]["dirs"] == [str(cpu_dir), str(mem_dir)]


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


@pytest.mark.parametrize("policy", ["required", "best-effort"])
def test_where_gpus_cannot_be_hidden_a_server_is_refused_or_logged_as_chosen(
    tmp_path, caplog, policy
):
    (tmp_path / "proc_devices").write_text(WITH_NVIDIA)
    caplog.set_level("WARNING")
    without_devices = fake_v1_tree(tmp_path)  # cpu and memory, no devices controller
    without_cgroups = (tmp_path / "nothing", tmp_path / "no_proc_cgroup")
    # (a refused server's cgroups are removed, which a fake tree of plain files cannot show)
    for where in [without_cgroups] if policy == "required" else [without_cgroups, without_devices]:
        spawner = make_spawner(tmp_path, *where, device_isolation=policy)
        if policy == "required":
            with pytest.raises(web.HTTPError, match="GPU isolation NOT enforced for p2501001"):
                spawner.ensure_cgroup()
        else:
            spawner.ensure_cgroup()
            assert "GPU isolation NOT enforced for p2501001" in caplog.text


def test_a_second_live_hub_with_the_same_id_starts_nothing(tmp_path):
    root, proc = fake_v1_tree(tmp_path)
    (tmp_path / "run").mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            "f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True)\n"
            "time.sleep(60)",
            str(tmp_path / "run" / "hub-samehub.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        spawner = make_spawner(tmp_path, root, proc, hub_id="samehub")
        with pytest.raises(web.HTTPError, match="another hub with hub id 'samehub'"):
            spawner.ensure_cgroup()
        assert not (root / "cpu" / "coursehub-servers-samehub").exists()
    finally:
        holder.kill()
        holder.communicate()


def test_a_cgroup_this_hub_did_not_record_is_left_alone_with_its_processes(tmp_path):
    root, proc = fake_v1_tree(tmp_path)
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        for controller in ("cpu", "memory"):
            found = root / controller / "coursehub-servers-hubA" / "jupyter-p2501001"
            found.mkdir(parents=True)
            (found / "cgroup.procs").write_text(f"{stranger.pid}\n")
        spawner = make_spawner(tmp_path, root, proc)
        cgroup = spawner.ensure_cgroup()
        assert cgroup is not None
        assert stranger.poll() is None
        assert cgroup.plan.job_dirs[0].name.startswith("jupyter-p2501001.")
    finally:
        stranger.kill()
        stranger.wait()


# --- real cgroups (root) -------------------------------------------------------------------


@pytest.fixture
def test_parent() -> Iterator[str]:
    """A fresh ``cgroup_parent``; every ``{name}-{hub_id}`` cgroup left is emptied and removed."""
    from coursehub.resources.cgroups import CgroupUnavailableError, job_cgroup_bases

    if os.geteuid() != 0:
        pytest.skip("needs root to make cgroups")
    try:
        version, cpu_base, mem_base = job_cgroup_bases()
    except CgroupUnavailableError as exc:
        pytest.skip(f"no writable cgroup filesystem: {exc}")
    if version != 1:
        pytest.skip("these tests use the cgroup v1 devices controller")
    name = f"chtest-{uuid.uuid4().hex[:8]}"
    yield name
    devices = Path("/sys/fs/cgroup/devices")
    for base in {cpu_base, mem_base, devices}:
        for parent in base.glob(f"{name}-*"):
            remove_cgroup_tree(parent)


@pytest.mark.root
def test_starting_a_user_on_hub_b_leaves_the_same_user_on_hub_a_running(tmp_path, test_parent):
    hub_a = make_spawner(tmp_path, username="zzcollide", hub_id="hubA", cgroup_parent=test_parent)
    hub_b = make_spawner(tmp_path, username="zzcollide", hub_id="hubB", cgroup_parent=test_parent)
    hub_a._cgroup = hub_a.ensure_cgroup()
    server_a = start_in(hub_a, "sleep", "300")
    try:
        hub_b._cgroup = hub_b.ensure_cgroup()
        assert {d.parent.name for d in hub_a._cgroup.plan.job_dirs} == {f"{test_parent}-hubA"}
        assert {d.parent.name for d in hub_b._cgroup.plan.job_dirs} == {f"{test_parent}-hubB"}
        server_b = start_in(hub_b, "sleep", "300")
        hub_b.remove_cgroup()  # hub B stops its server
        assert server_b.wait(timeout=10) == -signal.SIGKILL
        time.sleep(0.2)
        assert server_a.poll() is None, "hub B killed hub A's server"
        assert server_a.pid in hub_a._cgroup.pids()
    finally:
        hub_a.remove_cgroup()
    assert server_a.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.root
def test_after_a_restart_a_hub_empties_only_the_cgroup_it_recorded(tmp_path, test_parent):
    before = make_spawner(tmp_path, cgroup_parent=test_parent)
    before._cgroup = before.ensure_cgroup()
    orphan = start_in(before, "sleep", "300")  # e.g. a kernel left by a server that died
    state = before.get_state()
    after = make_spawner(tmp_path, cgroup_parent=test_parent)  # the same hub, restarted
    after.load_state(state)
    after._cgroup = after.ensure_cgroup()
    assert orphan.wait(timeout=10) == -signal.SIGKILL
    assert after._cgroup.plan.job_dirs[0].name == "jupyter-p2501001"
    # the same path made again by someone else (new inode): no longer this hub's record
    stale_state = after.get_state()
    after.remove_cgroup()
    other = make_spawner(tmp_path, cgroup_parent=test_parent)
    other._cgroup = other.ensure_cgroup()
    survivor = start_in(other, "sleep", "300")
    restarted = make_spawner(tmp_path, cgroup_parent=test_parent)
    restarted.load_state(stale_state)
    restarted._cgroup = restarted.ensure_cgroup()
    assert survivor.poll() is None
    assert restarted._cgroup.plan.job_dirs[0].name.startswith("jupyter-p2501001.")
    restarted.remove_cgroup()
    other.remove_cgroup()
    assert survivor.wait(timeout=10) == -signal.SIGKILL


OPEN_PROBE = (
    "import sys\n"
    "for path in sys.argv[1:]:\n"
    "    try:\n"
    "        open(path, 'rb').close(); print('open')\n"
    "    except OSError as exc:\n"
    "        print(exc.errno)\n"
)


def mknod_gpus(tmp_path: Path, minors) -> list[str]:
    """Make character nodes c 195:N (no driver here: opening one gives ENXIO unless denied)."""
    paths = []
    for minor in minors:
        node = tmp_path / f"nvidia{minor}"
        os.mknod(node, 0o666 | 0o020000, os.makedev(195, minor))
        paths.append(str(node))
    return paths


@pytest.mark.root
def test_a_devices_cgroup_deny_rule_stops_open_of_that_device(tmp_path, test_parent):
    scratch = Path("/sys/fs/cgroup/devices") / f"{test_parent}-scratch" / "null-denied"
    scratch.mkdir(parents=True)
    (scratch / "devices.deny").write_text("c 1:3 rwm")  # /dev/null
    code = f"import os\nopen({str(scratch / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
    done = subprocess.run(
        [sys.executable, "-c", code + OPEN_PROBE, "/dev/null", "/dev/zero"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["1", "open"]  # EPERM for /dev/null, /dev/zero still opens
    outside = subprocess.run(
        [sys.executable, "-c", OPEN_PROBE, "/dev/null"], capture_output=True, text=True, check=True
    )
    assert outside.stdout.split() == ["open"]


@pytest.mark.root
@pytest.mark.parametrize(
    ("visible", "expected"),
    [([], ["1", "1", "open"]), ([1], ["1", "6", "open"])],
    ids=["no-gpu", "gpu-1"],
)
def test_a_server_opens_only_the_gpus_of_its_profile(tmp_path, test_parent, visible, expected):
    nodes = mknod_gpus(tmp_path, [0, 1])
    (tmp_path / "proc_devices").write_text(Path("/proc/devices").read_text())
    spawner = make_spawner(tmp_path, cgroup_parent=test_parent, visible_gpus=visible)
    spawner._cgroup = spawner.ensure_cgroup()
    try:
        devices_dir = spawner._cgroup.plan.job_dirs[-1]
        listed = (devices_dir / "devices.list").read_text()
        opens = [nvidia_access(listed, m) for m in (0, 1, 255)]
        assert opens == [False, 1 in visible, bool(visible)]
        argv = [sys.executable, "-c", OPEN_PROBE, *nodes, "/dev/null"]
        probe = start_in(spawner, *argv, output=True)
        out, _ = probe.communicate(timeout=30)
        # 1 = EPERM (the cgroup denies it); 6 = ENXIO (allowed, but no driver on this host)
        assert out.split() == expected
    finally:
        spawner.remove_cgroup()
