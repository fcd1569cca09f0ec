"""The team's "Students' servers" page: who each student is, and what each server was started for.

The hub is replaced by a stand-in that answers the user list as the hub's
REST API does (``GET /users``: ``servers[""]`` with ``ready``,
``user_options``...); the real hub's answers and shares are in
``tests/test_teamaccess_hub.py``.
"""

from __future__ import annotations

import html
from types import SimpleNamespace

import pytest

from coursehub.catalog.seed import DEMO_MEMBERS
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)

TEACHER = identity_headers(IDENTITIES["teacher"])


class StandInHub:
    """What the page asks of :class:`coursehub.hub.hubclient.HubClient`: the users, by pages."""

    def __init__(self, users):
        self.users = users

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def paginate(self, path):
        assert path == "/users"
        return iter(self.users)


USERS = [
    {
        "name": "p2500001",
        "last_activity": "2026-12-02T08:00:00Z",
        "servers": {
            "": {"ready": True, "url": "/user/p2500001/", "user_options": {"course": "mlmeca-2025"}}
        },
    },
    {
        "name": "p2500002",
        "last_activity": "2026-12-02T08:01:00Z",
        "servers": {"": {"ready": True, "url": "/user/p2500002/", "user_options": {}}},
    },
    {"name": "p2500003", "servers": {}},
]


@pytest.fixture
def page(database_url, monkeypatch):
    from coursehub.web.views import teamaccess

    seed_web_catalog(database_url)
    monkeypatch.setattr(teamaccess, "hub_client", lambda: StandInHub(USERS))
    monkeypatch.setattr(teamaccess, "sync_team_shares", lambda *a, **k: SimpleNamespace(errors=[]))
    app = make_test_app(database_url)
    try:
        answer = app.test_client().get("/courses/mlmeca-2025/servers", headers=TEACHER)
        assert answer.status_code == 200
        yield html.unescape(answer.get_data(as_text=True))
    finally:
        dispose_app(app)


def row_of(body: str, username: str) -> str:
    start = body.index(f'<td class="code">{username}</td>')
    return body[start : body.index("</tr>", start)]


def test_each_student_is_shown_with_their_name(page):
    seeded = {username: f"{first} {last}" for username, first, last, *_ in DEMO_MEMBERS}
    for username in ("p2500001", "p2500002", "p2500003"):
        assert f"<td>{seeded[username]}</td>" in row_of(page, username)


def test_started_for_names_the_course_or_says_none_was_chosen(page):
    assert "mlmeca-2025" in row_of(page, "p2500001")
    assert "no course chosen" in row_of(page, "p2500002")
    assert "no course chosen" not in row_of(page, "p2500003")  # stopped: nothing to say


@pytest.fixture
def page_with_oom_kills(database_url, monkeypatch):
    from datetime import UTC, datetime

    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from coursehub.catalog.models.usage import UsageUnit
    from coursehub.meter.records import with_oom_kills

    seed_web_catalog(database_url)
    now = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
    units = [  # username, course, kind, exit reason
        ("p2500001", "mlmeca-2025", "server", with_oom_kills("stopped", 2)),
        ("p2500001", "mlmeca-2025", "server", with_oom_kills("stopped", 1)),
        ("p2500001", "other-2025", "server", with_oom_kills("stopped", 5)),
        ("p2500002", "mlmeca-2025", "job", "OUT_OF_MEMORY; 4 OOM kills"),
        ("p2500002", "mlmeca-2025", "server", with_oom_kills("stopped", 0)),
    ]
    engine = create_engine(database_url)
    with Session(engine) as session:
        for n, (username, course, kind, reason) in enumerate(units):
            session.add(
                UsageUnit(
                    unit_id=f"u{n}",
                    kind=kind,
                    username=username,
                    course_id=course,
                    started_at=now,
                    last_at=now,
                    exit_reason=reason,
                )
            )
        session.commit()
    engine.dispose()
    monkeypatch.setattr(teamaccess_views(), "hub_client", lambda: StandInHub(USERS))
    monkeypatch.setattr(
        teamaccess_views(), "sync_team_shares", lambda *a, **k: SimpleNamespace(errors=[])
    )
    app = make_test_app(database_url)
    try:
        answer = app.test_client().get("/courses/mlmeca-2025/servers", headers=TEACHER)
        assert answer.status_code == 200
        yield html.unescape(answer.get_data(as_text=True))
    finally:
        dispose_app(app)


def teamaccess_views():
    from coursehub.web.views import teamaccess

    return teamaccess


def test_the_oom_kills_of_each_students_servers_in_this_course_are_counted(page_with_oom_kills):
    assert "Out of memory" in page_with_oom_kills
    assert "<td>3</td>" in row_of(page_with_oom_kills, "p2500001")  # not the other course's
    assert "<td>0</td>" in row_of(page_with_oom_kills, "p2500002")  # a job is not a server
    assert "<td>0</td>" in row_of(page_with_oom_kills, "p2500003")


@pytest.mark.parametrize(
    ("reason", "kills", "text"),
    [("stopped", 0, "stopped"), ("stopped", 1, "stopped; 1 OOM kill"), ("x", 3, "x; 3 OOM kills")],
)
def test_a_servers_oom_kills_travel_in_its_exit_reason(reason, kills, text):
    from coursehub.meter.records import oom_kills_of, with_oom_kills

    assert with_oom_kills(reason, kills) == text
    assert oom_kills_of(text) == kills
    assert oom_kills_of("OOM kills happened") == 0
