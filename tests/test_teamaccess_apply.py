"""Applying a team share plan, against a recording stand-in for the hub's client."""

from __future__ import annotations

from typing import Any

from coursehub.hub.hubclient import HubError
from coursehub.hub.pacing import UNPACED, Pacer
from coursehub.teamaccess.shares import SharePlan, apply_share_plan


class RecordingClient:
    """Records ``(method, path, body)``; answers ``refuse[(method, path)]`` with that status."""

    def __init__(self, refuse: dict[tuple[str, str], int] | None = None) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.refuse = refuse or {}

    def request(self, method: str, path: str, body: Any = None, **_kw: Any) -> Any:
        self.sent.append((method, path, body))
        if (status := self.refuse.get((method, path))) is not None:
            raise HubError(status, "refused", method, path)
        return {}


def plan(grant=(), revoke=(), grant_users=(), revoke_users=()) -> SharePlan:
    return SharePlan("a-2025", grant, revoke, grant_users, revoke_users)


def test_group_shares_come_first_then_user_shares_then_the_revocations():
    client = RecordingClient()
    done: list[int] = []
    p = plan(("s1",), ("old",), grant_users=(("s1", "t1"),), revoke_users=(("old", "t1"),))
    report = apply_share_plan(client, p, Pacer(UNPACED, progress=done.append))
    assert client.sent == [
        ("POST", "/shares/s1/", {"group": "formgrade-a-2025"}),
        ("POST", "/shares/s1/", {"user": "t1"}),
        ("PATCH", "/shares/old/", {"user": "t1"}),
        ("DELETE", "/groups/formgrade-a-2025/shared/old/", None),
    ]
    assert (report.granted, report.granted_users) == (["s1"], [("s1", "t1")])
    assert (report.revoked, report.revoked_users) == (["old"], [("old", "t1")])
    assert done == [1, 1, 1, 1]  # each request went through the pacer


def test_a_former_students_group_share_stays_while_a_user_share_could_not_be_revoked():
    client = RecordingClient({("PATCH", "/shares/old/"): 403})
    report = apply_share_plan(client, plan(revoke_users=(("old", "t1"),), revoke=("old",)))
    assert [m for m, _p, _b in client.sent] == ["PATCH"]
    assert report.revoked == [] and report.errors[0][0] == "old"


def test_a_share_already_gone_counts_as_revoked_and_a_refused_grant_as_an_error():
    client = RecordingClient({("PATCH", "/shares/old/"): 404, ("POST", "/shares/s1/"): 400})
    p = plan(grant_users=(("s1", "t1"),), revoke_users=(("old", "t1"),))
    report = apply_share_plan(client, p)
    assert report.revoked_users == [("old", "t1")] and report.granted_users == []
    assert [s for s, _m in report.errors] == ["s1"]
