"""The team's access plans, from tables: shares to grant or revoke, the servers' rows."""

from __future__ import annotations

from datetime import UTC, datetime

from coursehub.teamaccess.servers import plan_server_rows
from coursehub.teamaccess.shares import ServerShares, plan_shares, plan_team_shares


def test_shares_are_granted_to_new_students_and_revoked_from_former_ones():
    plan = plan_shares("a-2025", ["s1", "s2", "s3"], ["s2", "gone"])
    assert (plan.grant, plan.revoke) == (("s1", "s3"), ("gone",))


def test_nothing_changes_when_every_student_is_shared():
    plan = plan_shares("a-2025", ["s1"], ["s1"])
    assert (plan.grant, plan.revoke) == ((), ())


def shares(groups=(), users=()):
    return ServerShares(frozenset(groups), frozenset(users))


def test_each_team_member_gets_a_share_of_each_students_server_besides_the_groups():
    servers = {"s1": shares(), "s2": shares(["formgrade-a-2025"], ["t1"])}
    plan = plan_team_shares("a-2025", ["s1", "s2"], servers, {"formgrade-a-2025": ["t1", "t2"]})
    assert plan.grant == ("s1",) and plan.revoke == ()
    assert plan.grant_users == (("s1", "t1"), ("s1", "t2"), ("s2", "t2"))
    assert plan.revoke_users == ()


def test_a_removed_team_member_loses_the_share_of_every_student_server():
    servers = {s: shares(["formgrade-a-2025"], ["t1", "gone"]) for s in ("s1", "s2")}
    plan = plan_team_shares("a-2025", ["s1", "s2"], servers, {"formgrade-a-2025": ["t1"]})
    assert plan.grant_users == () and plan.revoke_users == (("s1", "gone"), ("s2", "gone"))
    assert (plan.grant, plan.revoke) == ((), ())


def test_a_former_students_server_loses_the_group_share_and_the_members_shares():
    servers = {
        "old": shares(["formgrade-a-2025"], ["t1"]),
        "s1": shares(["formgrade-a-2025"], ["t1"]),
    }
    plan = plan_team_shares("a-2025", ["s1"], servers, {"formgrade-a-2025": ["t1"]})
    assert plan.revoke == ("old",) and plan.revoke_users == (("old", "t1"),)
    assert plan.grant == () and plan.grant_users == ()


def test_the_teams_of_a_students_other_courses_keep_their_shares():
    servers = {"s1": shares(["formgrade-a-2025", "formgrade-b-2025"], ["ta", "tb"])}
    teams = {"formgrade-a-2025": ["ta"], "formgrade-b-2025": ["tb"]}
    plan = plan_team_shares("a-2025", ["s1"], servers, teams)
    assert plan.size == 0
    # s1 left course a: the team of a loses its share, the team of b keeps its own
    plan = plan_team_shares("a-2025", [], servers, teams)
    assert plan.revoke == ("s1",) and plan.revoke_users == (("s1", "ta"),)


def test_a_server_is_not_shared_with_its_owner_nor_with_members_of_other_groups():
    servers = {"t1": shares(["formgrade-a-2025", "lab-friends"], ["friend"])}
    teams = {"formgrade-a-2025": ["t1", "t2"], "lab-friends": ["friend"]}
    plan = plan_team_shares("a-2025", ["t1"], servers, teams)
    assert plan.grant_users == (("t1", "t2"),) and plan.revoke_users == (("t1", "friend"),)


def test_a_student_whose_server_the_hub_does_not_know_is_left_out():
    plan = plan_team_shares(
        "a-2025", ["s1", "nohub"], {"s1": shares()}, {"formgrade-a-2025": ["t"]}
    )
    assert plan.grant == ("s1",) and plan.grant_users == (("s1", "t"),)


def test_server_rows_show_running_servers_first_then_the_others_by_name():
    users = {
        "ann": {"name": "ann", "last_activity": "2025-09-01T08:00:00Z", "servers": {}},
        "bob": {
            "name": "bob",
            "servers": {
                "": {
                    "ready": True,
                    "url": "/user/bob/",
                    "last_activity": "2025-09-01T09:30:00.123Z",
                    "user_options": {"course": "a-2025"},
                }
            },
        },
        "cid": {"name": "cid", "servers": {"": {"ready": False, "pending": "spawn"}}},
    }
    rows = plan_server_rows(["cid", "ann", "bob", "dan"], users)
    assert [(r.username, r.state) for r in rows] == [
        ("bob", "running"),
        ("ann", "stopped"),
        ("cid", "starting"),
        ("dan", "no hub account"),
    ]
    bob = rows[0]
    assert bob.url == "/user/bob/" and bob.course == "a-2025"
    assert bob.last_activity == datetime(2025, 9, 1, 9, 30, 0, 123000, tzinfo=UTC)
    assert rows[1].url is None and rows[1].last_activity == datetime(2025, 9, 1, 8, tzinfo=UTC)
