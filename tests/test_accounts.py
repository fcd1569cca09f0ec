"""``coursehub accounts sync``: the plan (pure), then real accounts made with useradd (root)."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import subprocess
import uuid

import pytest

from coursehub.accounts.apply import apply_plan, read_accounts, read_groups
from coursehub.accounts.plan import (
    ACCOUNT_COMMENT,
    HostAccount,
    plan_accounts,
    render_plan,
    unsafe_reason,
)
from coursehub.catalog.courses import create_course, create_portal, create_year
from coursehub.catalog.members import add_member, remove_member
from coursehub.cli import main
from coursehub.coursedata.ensure import Roster, load_rosters
from coursehub.coursedata.folders import unix_group_name


def test_safe_names_follow_debians_useradd_rule_and_spare_system_accounts():
    assert unsafe_reason("ada", None) == ""
    assert unsafe_reason("_svc-1", None) == ""
    assert "not a safe Unix name" in unsafe_reason("ada@uni.example", None)
    assert "not a safe Unix name" in unsafe_reason("1ada", None)
    assert "not a safe Unix name" in unsafe_reason("a" * 33, None)
    assert unsafe_reason("daemon", 1) == "a system account (uid 1)"


def test_the_plan_creates_the_missing_sets_the_groups_and_only_reports_the_leavers():
    roster = Roster("ml1", team=frozenset({"tina"}), students=frozenset({"sam", "bad.name"}))
    ours = HostAccount(uid=1500, comment=ACCOUNT_COMMENT, home="/home/x", home_mode=0o755)
    accounts = {"tina": ours, "gone": ours}
    groups = {"cht-ml1": ("tina",), "chs-ml1": ("gone",)}
    plan = plan_accounts([roster], accounts, groups)
    assert plan.create == ("sam",)
    assert plan.private_homes == ("tina",)
    assert [(g.group, g.added, g.removed) for g in plan.groups] == [
        ("chs-ml1", ("sam",), ("gone",))
    ]
    assert plan.refused[0][0] == "bad.name"
    assert plan.left == ("gone",)
    text = render_plan(plan)
    assert "refused bad.name: not a safe Unix name" in text
    assert "in no course any more (kept, with their homes): gone" in text


def test_a_host_in_step_gets_an_empty_plan():
    roster = Roster("ml1", team=frozenset({"tina"}), students=frozenset())
    account = HostAccount(uid=1500, comment=ACCOUNT_COMMENT, home="/home/t", home_mode=0o700)
    plan = plan_accounts([roster], {"tina": account}, {"cht-ml1": ("tina",), "chs-ml1": ()})
    assert plan.changes == 0
    assert render_plan(plan).endswith("nothing to change")


def _password_field(name: str) -> str:
    with open("/etc/shadow", encoding="utf-8") as shadow:
        for line in shadow:
            fields = line.split(":")
            if fields[0] == name:
                return fields[1]
    raise AssertionError(f"{name} not in /etc/shadow")


@pytest.fixture
def names():
    """Unique usernames; every account and group they lead to is removed after the test."""
    tag = uuid.uuid4().hex[:6]
    made = {"teacher": f"chacc{tag}t", "student": f"chacc{tag}s", "course": f"cha{tag}"}
    yield made
    for key in ("teacher", "student"):
        subprocess.run(["userdel", "-r", made[key]], check=False, capture_output=True)
    for role in ("team", "students"):
        group = unix_group_name(made["course"], role)
        subprocess.run(["groupdel", group], check=False, capture_output=True)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (useradd, groupadd)")
def test_live_sync_makes_locked_private_accounts_in_their_groups_once(
    session, database_url, names, capsys
):
    year = create_year(session, "2025-2026")
    portal = create_portal(session, "TEST", "Tests")
    course = create_course(session, names["course"], "Accounts", year, portal)
    names["course"] = course.course_id  # with its year, as the teardown removes its groups
    add_member(session, course, names["teacher"], "teacher")
    add_member(session, course, names["student"], "student")
    add_member(session, course, "someone@uni.example", "student")
    session.commit()

    assert main(["accounts", "sync", "--dry-run", "--database-url", database_url]) == 1
    dry = capsys.readouterr().out
    assert f"create {names['student']} (locked password, home 0700)" in dry
    assert "refused someone@uni.example: not a safe Unix name" in dry
    with pytest.raises(KeyError):
        pwd.getpwnam(names["student"])

    assert main(["accounts", "sync", "--database-url", database_url]) == 1
    for key in ("teacher", "student"):
        account = pwd.getpwnam(names[key])
        assert account.pw_gecos == ACCOUNT_COMMENT
        assert stat.S_IMODE(os.stat(account.pw_dir).st_mode) == 0o700
        assert os.stat(account.pw_dir).st_uid == account.pw_uid
        assert _password_field(names[key]).startswith("!")
        status = subprocess.run(["passwd", "-S", names[key]], capture_output=True, text=True)
        assert status.stdout.split()[1] == "L"
    team = grp.getgrnam(unix_group_name(names["course"], "team")).gr_mem
    students = grp.getgrnam(unix_group_name(names["course"], "students")).gr_mem
    assert team == [names["teacher"]] and students == [names["student"]]
    capsys.readouterr()

    assert main(["accounts", "sync", "--database-url", database_url]) == 1
    assert "nothing to change" in capsys.readouterr().out

    # the student leaves: out of the group, reported, account and home kept
    remove_member(session, course, names["student"])
    session.commit()
    plan = plan_accounts(load_rosters(session), read_accounts(), read_groups())
    assert names["student"] in plan.left
    apply_plan(plan)
    assert grp.getgrnam(unix_group_name(names["course"], "students")).gr_mem == []
    assert os.path.isdir(pwd.getpwnam(names["student"]).pw_dir)
