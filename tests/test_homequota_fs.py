"""Home quotas on the file system: detection, the commands per backend, and btrfs for real."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid

import pytest

from coursehub.homequota.fs import (
    QuotaBackend,
    QuotaError,
    apply_limit,
    choose_backend,
    detect_backend,
    parse_mountinfo,
    plan_limit,
    run_commands,
)
from coursehub.homequota.reading import read_btrfs_usage
from loopfs import loop_mount

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
30 22 8:2 / /home rw,relatime shared:2 - xfs /dev/sdb1 rw,attr2,inode64,usrquota,prjquota
31 22 8:3 / /srv/homes rw,relatime shared:3 - ext4 /dev/sdc1 rw,usrjquota=aquota.user,jqfmt=vfsv1
32 22 0:40 / /scratch rw shared:4 - tmpfs tmpfs rw,size=1024k
33 22 0:41 /homes /srv/b\\040tree rw shared:5 - btrfs /dev/sdd rw,space_cache=v2,subvolid=5
34 22 8:4 / /srv/plain rw shared:6 - xfs /dev/sde1 rw,attr2,noquota
"""
MOUNTS = {m.point: m for m in parse_mountinfo(MOUNTINFO)}


def test_mountinfo_lines_give_point_type_and_every_option():
    assert MOUNTS["/home"].fstype == "xfs"
    assert {"usrquota", "prjquota", "rw"} <= MOUNTS["/home"].options
    assert "usrjquota" in MOUNTS["/srv/homes"].options
    assert "/srv/b tree" in MOUNTS  # octal escapes of mountinfo decoded


@pytest.mark.parametrize(
    ("point", "inode", "kind"),
    [
        ("/home", 1234, "xfs-project"),
        ("/srv/homes", 1234, "ext4-user"),
        ("/srv/b tree", 256, "btrfs-qgroup"),
        ("/srv/b tree", 300, None),
        ("/scratch", 1234, None),
        ("/srv/plain", 1234, None),
    ],
)
def test_each_file_system_gets_the_quota_it_offers(point, inode, kind):
    backend = choose_backend(MOUNTS[point], inode)
    assert backend.kind == kind and backend.mount == point
    assert bool(backend.reason) is (kind is None)


def test_a_btrfs_home_that_is_no_subvolume_says_so():
    reason = choose_backend(MOUNTS["/srv/b tree"], 300).reason
    assert reason == "the home is a plain folder on btrfs, not a subvolume of its own"


def test_xfs_with_only_user_quotas_limits_the_user():
    mount = parse_mountinfo("30 22 8:2 / /home rw - xfs /dev/sdb1 rw,uquota\n")[0]
    assert choose_backend(mount, 99).kind == "xfs-user"


def test_the_home_is_found_below_its_mount(tmp_path):
    text = f"22 1 8:1 / / rw - tmpfs none rw\n40 22 0:50 / {tmp_path} rw - btrfs /dev/x rw\n"
    home = tmp_path / "alice"
    home.mkdir()
    assert detect_backend(home, text).mount == str(tmp_path)


def test_a_home_that_does_not_exist_is_refused(tmp_path):
    with pytest.raises(QuotaError, match="is not a folder"):
        detect_backend(tmp_path / "nobody")


def test_setquota_sets_a_hard_block_limit_in_kib_rounded_up():
    backend = QuotaBackend("ext4-user", "/srv/homes")
    assert plan_limit(backend, "p2501001", 1001, "/srv/homes/p2501001", 2 * 2**30 + 1) == [
        ["setquota", "-u", "p2501001", "0", str(2 * 2**20 + 1), "0", "0", "/srv/homes"]
    ]
    assert plan_limit(backend, "p2501001", 1001, "/srv/homes/p2501001", None) == [
        ["setquota", "-u", "p2501001", "0", "0", "0", "0", "/srv/homes"]
    ]


def test_xfs_quota_limits_the_user_or_the_homes_project():
    user = QuotaBackend("xfs-user", "/home")
    assert plan_limit(user, "p2501001", 1001, "/home/p2501001", 2**30) == [
        ["xfs_quota", "-x", "-c", f"limit -u bhard={2**30} p2501001", "/home"]
    ]
    project = QuotaBackend("xfs-project", "/home")
    assert plan_limit(project, "p2501001", 1001, "/home/p2501001", 2**30) == [
        ["xfs_quota", "-x", "-c", "project -s -p /home/p2501001 1001", "/home"],
        ["xfs_quota", "-x", "-c", f"limit -p bhard={2**30} 1001", "/home"],
    ]


def test_btrfs_limits_the_homes_subvolume_or_removes_the_limit():
    backend = QuotaBackend("btrfs-qgroup", "/srv")
    assert plan_limit(backend, "a", 1, "/srv/a", 5 * 2**20) == [
        ["btrfs", "qgroup", "limit", str(5 * 2**20), "/srv/a"]
    ]
    assert plan_limit(backend, "a", 1, "/srv/a", None) == [
        ["btrfs", "qgroup", "limit", "none", "/srv/a"]
    ]


def test_no_backend_refuses_with_its_reason():
    with pytest.raises(QuotaError, match="no quota for /x: tmpfs has no per-user quota"):
        plan_limit(QuotaBackend(None, "/", "tmpfs has no per-user quota"), "a", 1, "/x", 1)


def test_a_failing_command_stops_with_its_last_line():
    def run(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "line one\nsetquota: not permitted\n")

    with pytest.raises(QuotaError) as caught:
        run_commands([["setquota", "-u", "a", "0", "1", "0", "0", "/"]], "quota of a", run)
    assert str(caught.value) == "quota of a: setquota -u a failed: setquota: not permitted"


def test_a_missing_tool_is_named():
    with pytest.raises(QuotaError, match="no-such-quota-tool is not installed"):
        run_commands([["no-such-quota-tool"]], "quota of a")


# --- btrfs for real: a loop device, one subvolume per home (root) -------------------------


@pytest.fixture
def btrfs_homes(tmp_path):
    with loop_mount(tmp_path, 160, "btrfs") as disk:
        subprocess.run(["btrfs", "quota", "enable", str(disk)], check=True, capture_output=True)
        yield disk


def write_until_refused(path, limit_mib):
    """Write 1 MiB chunks to ``path`` (fsync each); return (MiB written, the refusal or None)."""
    written = 0
    try:
        with open(path, "wb") as handle:
            for _ in range(limit_mib * 3):
                handle.write(b"\1" * 2**20)
                handle.flush()
                os.fsync(handle.fileno())
                written += 1
    except OSError as exc:
        return written, exc
    return written, None


@pytest.mark.root
def test_a_btrfs_home_at_its_quota_refuses_writes_and_the_next_student_is_unaffected(
    btrfs_homes,
):
    alice, bob = (f"chq{uuid.uuid4().hex[:6]}" for _ in range(2))
    for user in (alice, bob):
        subprocess.run(
            ["btrfs", "subvolume", "create", str(btrfs_homes / user)],
            check=True,
            capture_output=True,
        )
    backend = apply_limit(str(btrfs_homes / alice), alice, 8 * 2**20)
    assert backend.kind == "btrfs-qgroup"
    written, refusal = write_until_refused(btrfs_homes / alice / "big.bin", 8)
    assert refusal is not None and refusal.errno == errno.EDQUOT, refusal
    assert written <= 8
    used, limit = read_btrfs_usage(str(btrfs_homes / alice))
    assert limit == 8 * 2**20 and used <= limit
    assert write_until_refused(btrfs_homes / bob / "big.bin", 8) == (24, None)
    apply_limit(str(btrfs_homes / alice), alice, None)
    assert read_btrfs_usage(str(btrfs_homes / alice))[1] is None


@pytest.mark.root
def test_a_plain_folder_on_btrfs_is_refused_with_the_reason(btrfs_homes):
    (btrfs_homes / "carol").mkdir()
    with pytest.raises(QuotaError, match="not a subvolume of its own"):
        apply_limit(str(btrfs_homes / "carol"), "carol", 2**20)
