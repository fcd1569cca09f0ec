"""Reading a home's usage and limit from each quota tool's answer (sample output, no quota kernel).

The samples follow the tools' own print formats: quota(1) (quota-tools
``quota.c``, ``showquotas``/``print_fs_location``), xfs_quota(8) (xfsprogs
``quota/quota.c``, ``quota_mount``), btrfs-qgroup(8).
"""

from __future__ import annotations

import subprocess

import pytest

from coursehub.homequota.fs import QuotaBackend, QuotaError
from coursehub.homequota.reading import (
    parse_btrfs_qgroup,
    parse_quota_report,
    parse_xfs_quota_report,
    plan_usage_read,
    read_home_usage,
    read_usage,
)

K = 1024

# quota -u -v -w -p --show-mntpoint --hide-device 1001
QUOTA_REPORT = (
    "Disk quotas for user p2501001 (uid 1001): \n"
    + """\
     Filesystem  blocks   quota   limit   grace   files   quota   limit   grace
              /       0       0       0       0       0       0       0       0
     /srv/homes 2097152*      0 2097152       0      12       0       0       0
/srv/course homes     512    1024       0       0       3       0       0       0
"""
)
# xfs_quota -c 'quota -u -b -N -n -v 1001' MOUNT (a long device name wraps)
XFS_REPORT = """\
/dev/sdb1                 1024          0    2097152   00 [--------] /home
/dev/mapper/vg0-homes-lv
                          2048    1048576          0   00 [--------] /srv/xfs
/dev/sdc1                    0          0          0   00 [--------] /scratch
"""
BTRFS_REPORT = """\
qgroupid         rfer         excl     max_rfer     max_excl
--------         ----         ----     --------     --------
0/257        19939328     19939328     20971520         none
"""


def test_quota_reports_kib_blocks_and_the_hard_limit_of_the_homes_mount():
    assert parse_quota_report(QUOTA_REPORT, "/srv/homes") == (2097152 * K, 2097152 * K)
    assert parse_quota_report(QUOTA_REPORT, "/srv/course homes") == (512 * K, 1024 * K)
    assert parse_quota_report(QUOTA_REPORT, "/") == (0, None)
    assert parse_quota_report(QUOTA_REPORT, "/elsewhere") is None


def test_xfs_quota_reports_the_homes_mount_even_after_a_wrapped_device():
    assert parse_xfs_quota_report(XFS_REPORT, "/home") == (1024 * K, 2097152 * K)
    assert parse_xfs_quota_report(XFS_REPORT, "/srv/xfs") == (2048 * K, 1048576 * K)
    assert parse_xfs_quota_report(XFS_REPORT, "/scratch") == (0, None)
    assert parse_xfs_quota_report("", "/home") is None


def test_btrfs_reports_referenced_bytes_and_max_rfer():
    assert parse_btrfs_qgroup(BTRFS_REPORT) == (19939328, 20971520)
    assert parse_btrfs_qgroup(BTRFS_REPORT.replace("20971520", "    none")) == (19939328, None)
    assert parse_btrfs_qgroup("ERROR: can't list qgroups: quotas not enabled\n") is None


def test_each_backend_reads_with_its_own_tool_for_the_homes_owner():
    home = "/home/p2501001"
    assert plan_usage_read(QuotaBackend("ext4-user", "/home"), home, 1001) == [
        "quota", "-u", "-v", "-w", "-p", "--show-mntpoint", "--hide-device", "1001"
    ]  # fmt: skip
    assert plan_usage_read(QuotaBackend("xfs-user", "/home"), home, 1001) == [
        "xfs_quota", "-c", "quota -u -b -N -n -v 1001", "/home"
    ]  # fmt: skip
    assert plan_usage_read(QuotaBackend("xfs-project", "/home"), home, 1001) == [
        "xfs_quota", "-c", "quota -p -b -N -n -v 1001", "/home"
    ]  # fmt: skip
    assert plan_usage_read(QuotaBackend("btrfs-qgroup", "/srv"), home, 1001)[:3] == [
        "btrfs", "qgroup", "show"
    ]  # fmt: skip
    with pytest.raises(QuotaError, match="no usage reading for tmpfs has no quota"):
        plan_usage_read(QuotaBackend(None, "/", "tmpfs has no quota"), home, 1001)


def answering(stdout: str, returncode: int = 0, stderr: str = ""):
    """A runner that records its commands and answers ``stdout``."""
    seen: list[list[str]] = []

    def run(command, **kwargs):
        seen.append(command)
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)

    return run, seen


def test_an_ext4_home_past_its_limit_is_read_although_quota_exits_with_1(tmp_path):
    run, seen = answering(QUOTA_REPORT, returncode=1)
    backend = QuotaBackend("ext4-user", "/srv/homes")
    assert read_home_usage(backend, str(tmp_path), run) == (2097152 * K, 2097152 * K)
    assert seen[0][-1] == str(tmp_path.stat().st_uid)


def test_an_xfs_project_home_is_read_through_xfs_quota(tmp_path):
    run, seen = answering(XFS_REPORT)
    assert read_usage(QuotaBackend("xfs-project", "/home"), str(tmp_path), run, uid=1001) == (
        1024 * K,
        2097152 * K,
    )
    assert seen == [["xfs_quota", "-c", "quota -p -b -N -n -v 1001", "/home"]]


def test_no_line_for_the_home_says_the_tools_error(tmp_path):
    run, _ = answering("", 1, "quota: Cannot open quotafile /srv/homes/aquota.user\n")
    with pytest.raises(QuotaError, match="Cannot open quotafile"):
        read_usage(QuotaBackend("ext4-user", "/srv/homes"), str(tmp_path), run)
    run, _ = answering("")
    with pytest.raises(QuotaError, match="no quota for /home"):
        read_usage(QuotaBackend("xfs-user", "/home"), str(tmp_path), run)


def test_a_missing_tool_is_named(tmp_path):
    def run(command, **kwargs):
        raise FileNotFoundError(command[0])

    with pytest.raises(QuotaError, match="xfs_quota is not installed"):
        read_usage(QuotaBackend("xfs-user", "/home"), str(tmp_path), run)
