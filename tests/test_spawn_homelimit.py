"""The home quota at spawn: picked from the course groups, set on the home, told to the server."""

from __future__ import annotations

import logging
import subprocess
import uuid
from types import SimpleNamespace

import pytest

from coursehub.errors import UsageError
from coursehub.homequota.fs import QuotaError
from coursehub.homequota.reading import read_btrfs_usage
from coursehub.spawn.homelimit import QUOTA_ENV, HomeLimit, department_default, plan_home_quota
from loopfs import loop_mount

M = 2**20


def test_the_most_generous_student_group_wins_and_teams_are_not_limited():
    groups = [
        ("nbgrader-a", {"home_quota": 1024 * M}),
        ("nbgrader-b", {"home_quota": 2048 * M}),
        ("formgrade-c", {"home_quota": 10 * M}),
        ("someone-elses-group", {"home_quota": 5}),
    ]
    assert plan_home_quota(groups, None) == 2048 * M
    assert plan_home_quota([("formgrade-c", {"home_quota": 10 * M})], 512 * M) is None
    assert plan_home_quota([], 512 * M) is None


def test_a_course_without_a_quota_takes_the_department_default_and_none_means_no_limit():
    assert plan_home_quota([("nbgrader-a", {})], 512 * M) == 512 * M
    assert (
        plan_home_quota([("nbgrader-a", {"home_quota": 64 * M}), ("nbgrader-b", {})], None) is None
    )


def test_the_department_default_is_read_from_the_hubs_environment():
    assert department_default({"COURSEHUB_HOME_QUOTA": "2G"}) == 2 * 2**30
    assert department_default({"COURSEHUB_HOME_QUOTA": "none"}) is None
    assert department_default({}) is None
    with pytest.raises(UsageError, match="COURSEHUB_HOME_QUOTA"):
        department_default({"COURSEHUB_HOME_QUOTA": "lots"})


def make_spawner(home, groups, name="p2501001"):
    user = SimpleNamespace(
        name=name, groups=[SimpleNamespace(name=g, properties=p) for g, p in groups]
    )
    return SimpleNamespace(
        user=user, home_dir=str(home), environment={"KEEP": "1"}, log=logging.getLogger("test")
    )


def test_a_new_home_gets_its_limit_at_spawn_and_the_server_is_told(tmp_path):
    calls = []
    spawner = make_spawner(tmp_path, [("nbgrader-a", {"home_quota": 64 * M})])
    HomeLimit("local", apply=lambda *args: calls.append(args) or "btrfs-qgroup")(spawner)
    assert calls == [(str(tmp_path), "p2501001", 64 * M)]
    assert spawner.environment == {"KEEP": "1", QUOTA_ENV: str(64 * M)}


def test_a_failing_quota_is_logged_and_never_stops_the_start(tmp_path, caplog):
    def refuse(home, user, size):
        raise QuotaError("no quota for HOME: tmpfs has no per-user quota coursehub can set")

    spawner = make_spawner(tmp_path, [("nbgrader-a", {"home_quota": 64 * M})])
    with caplog.at_level(logging.WARNING):
        HomeLimit("local", apply=refuse)(spawner)
    assert "p2501001: home quota not set: no quota for HOME: tmpfs" in caplog.text
    assert spawner.environment[QUOTA_ENV] == str(64 * M)


def test_slurm_and_students_without_a_quota_touch_no_home(tmp_path):
    def never(*args):
        raise AssertionError("no home quota expected")

    slurm = make_spawner(tmp_path, [("nbgrader-a", {"home_quota": 64 * M})])
    HomeLimit("slurm", apply=never)(slurm)
    assert slurm.environment[QUOTA_ENV] == str(64 * M)
    unlimited = make_spawner(tmp_path, [("nbgrader-a", {})])
    HomeLimit("local", apply=never)(unlimited)
    assert unlimited.environment == {"KEEP": "1"}


def test_a_home_not_made_yet_is_left_for_later(tmp_path):
    spawner = make_spawner(tmp_path / "missing", [("nbgrader-a", {"home_quota": 64 * M})])
    HomeLimit("local", apply=lambda *args: pytest.fail("no home to limit"))(spawner)


@pytest.mark.root
def test_a_btrfs_home_made_after_the_last_apply_is_limited_at_its_first_spawn(tmp_path):
    with loop_mount(tmp_path, 160, "btrfs") as disk:
        subprocess.run(["btrfs", "quota", "enable", str(disk)], check=True, capture_output=True)
        user = f"chq{uuid.uuid4().hex[:6]}"
        home = disk / user
        subprocess.run(["btrfs", "subvolume", "create", str(home)], check=True, capture_output=True)
        assert read_btrfs_usage(str(home))[1] is None
        spawner = make_spawner(home, [("nbgrader-a", {"home_quota": 16 * M})], name=user)
        HomeLimit("local")(spawner)
        assert read_btrfs_usage(str(home))[1] == 16 * M
