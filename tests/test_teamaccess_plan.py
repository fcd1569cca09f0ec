"""The team's access plans, from tables: shares to grant or revoke, the servers' rows."""

from __future__ import annotations

from datetime import UTC, datetime

from coursehub.teamaccess.servers import plan_server_rows
from coursehub.teamaccess.shares import plan_shares


def test_shares_are_granted_to_new_students_and_revoked_from_former_ones():
    plan = plan_shares("a-2025", ["s1", "s2", "s3"], ["s2", "gone"])
    assert (plan.grant, plan.revoke) == (("s1", "s3"), ("gone",))


def test_nothing_changes_when_every_student_is_shared():
    plan = plan_shares("a-2025", ["s1"], ["s1"])
    assert (plan.grant, plan.revoke) == ((), ())


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
