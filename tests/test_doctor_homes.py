"""``coursehub doctor``'s homes check: the catalog's quotas against real btrfs qgroups (root)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from coursehub.cli import main
from coursehub.doctor.homes import check_homes
from coursehub.homequota.fs import QuotaBackend, QuotaError
from coursehub.homequota.reading import read_home_usage
from coursehub.homequota.survey import HomesSurvey, describe_near, survey_homes
from loopfs import loop_mount

M = 2**20


@pytest.fixture
def catalog(database_url, tmp_path, monkeypatch):
    """The seeded catalog: mlmeca-2025 (portal MECA), students p2500001 to p2500004."""
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.delenv("COURSEHUB_HOME_QUOTA", raising=False)
    assert main(["db", "seed", "--database-url", database_url]) == 0
    return database_url


def test_at_most_n_users_are_named_then_counted():
    near = [("alice", 99.4), ("bob", 95.0), ("carol", 91.0)]
    assert describe_near(near, 2) == "alice (99 %), bob (95 %) and 1 more"
    assert describe_near(near, 3) == "alice (99 %), bob (95 %), carol (91 %)"


def test_the_file_systems_own_limit_wins_over_the_catalogs(tmp_path):
    """Stand-in readings and backend: the real btrfs case is the root test below."""
    for user in ("alice", "bob"):
        (tmp_path / user).mkdir()
    readings = {"alice": (95 * M, None), "bob": (95 * M, 200 * M)}

    def read(backend, home):
        return readings[home.rsplit("/", 1)[1]]

    quotas = {"alice": 100 * M, "bob": 100 * M, "dan": None}
    survey = survey_homes(
        quotas, tmp_path, 90, read, detect=lambda home: QuotaBackend("btrfs-qgroup", "/")
    )
    assert survey.near == [("alice", 95.0)] and survey.read == 2


def test_ext4_and_xfs_homes_are_read_not_left_unread(tmp_path):
    """quota(1) and xfs_quota(8) answers (tests/test_homequota_reading.py has their formats)."""
    answers = {
        "quota": "     /srv/homes   97280*      0  102400       0      12      0      0      0\n",
        "xfs_quota": "/dev/sdb1   10240   0   102400   00 [--------] /srv/homes\n",
    }

    def run(command, **kwargs):
        return subprocess.CompletedProcess(command, 0, answers[command[0]], "")

    for user in ("alice", "bob"):
        (tmp_path / user).mkdir()
    kinds = {"alice": "ext4-user", "bob": "xfs-project"}
    survey = survey_homes(
        {"alice": 200 * M, "bob": 200 * M},
        tmp_path,
        90,
        lambda backend, home: read_home_usage(backend, home, run),
        detect=lambda home: QuotaBackend(kinds[home.name], "/srv/homes"),
    )
    assert survey.unread == {} and survey.read == 2
    assert survey.near == [("alice", 95.0)]


def test_a_home_without_a_quota_backend_has_no_reading():
    with pytest.raises(QuotaError, match="no usage reading for tmpfs"):
        read_home_usage(QuotaBackend(None, "/", "tmpfs"), "/")


def test_homes_on_a_file_system_without_quota_are_skipped_with_the_reason(catalog, tmp_path):
    main(["home", "quota", "--portal", "MECA", "64M", "--database-url", catalog])
    (tmp_path / "p2500001").mkdir()
    result = check_homes(catalog, tmp_path)
    assert result.level == "skip" and result.line.startswith("no home's usage could be read")
    assert check_homes(catalog, tmp_path / "nowhere").level == "skip"


@pytest.mark.root
def test_homes_near_their_btrfs_quota_are_named(catalog, tmp_path):
    with loop_mount(tmp_path, 200, "btrfs") as disk:
        subprocess.run(["btrfs", "quota", "enable", str(disk)], check=True, capture_output=True)
        users = ("p2500001", "p2500002", "p2500003")
        for user in users:
            subprocess.run(
                ["btrfs", "subvolume", "create", str(disk / user)], check=True, capture_output=True
            )
        assert main(["home", "quota", "--portal", "MECA", "20M", "--database-url", catalog]) == 0
        assert main(["home", "apply", str(disk), "--database-url", catalog]) == 0
        below = check_homes(catalog, disk)
        assert below.level == "ok" and below.line.startswith("3 homes in")
        for user, mib in (("p2500001", 19), ("p2500002", 19)):
            with open(disk / user / "big.bin", "wb") as handle:
                handle.write(b"\1" * mib * M)
        subprocess.run(["sync"], check=True)
        subprocess.run(
            ["btrfs", "quota", "rescan", "-w", str(disk)], check=True, capture_output=True
        )
        near = check_homes(catalog, disk, warn_at=90, named=1)
        assert near.level == "warn", near.line
        assert near.line.startswith(f"2 of 3 homes in {disk} at 90 % of their quota or more: ")
        assert "p2500001 (9" in near.line and near.line.count("(9") == 1
        assert "and 1 more" in near.line and "p2500003" not in near.line


def test_a_survey_without_readings_is_empty():
    assert survey_homes({}, Path("/nonexistent"), 90) == HomesSurvey()
