"""The team in its students' servers, live through a real JupyterHub and its shares API.

A hub of this module's own (tests/hubfixture.py's ``RunningHub``) with one more
service, ``coursehub-app``, holding the scopes the rendered configuration
gives the course app (``coursehub-sync`` role, ``shares`` included).
"""

from __future__ import annotations

import secrets
import uuid

import pytest
import requests

from coursehub.hub.hubclient import HubClient
from coursehub.teamaccess.servers import read_server_rows
from coursehub.teamaccess.shares import read_server_sharers, read_shared_owners, sync_team_shares
from helpers import free_port, wait_until
from hubfixture import RunningHub, find_proxy

pytestmark = [pytest.mark.integration, pytest.mark.slow]

APP_SCOPES = ["admin:users", "admin:groups", "list:users", "read:users", "admin:servers", "shares"]


@pytest.fixture(scope="module")
def app_hub(tmp_path_factory):
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    token = secrets.token_hex(16)
    extra = f"""
c.JupyterHub.services.append({{"name": "coursehub-app", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "coursehub-app", "scopes": {APP_SCOPES!r}, "services": ["coursehub-app"]}}
)
"""
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(tmp_path_factory.mktemp("teamhub"), proxy, ports, extra_config=extra)
    hub.start()
    try:
        yield hub, HubClient(hub.api_url, token)
    finally:
        hub.stop()


@pytest.fixture(scope="module")
def courses(app_hub):
    """Two courses, each with a teacher and a student; the student of A has a running server."""
    hub, client = app_hub
    tag = uuid.uuid4().hex[:6]
    names = {k: f"{k}{tag}" for k in ("teacher-a", "student-a", "teacher-b", "student-b")}
    ids = {"a": f"a{tag}-2025", "b": f"b{tag}-2025"}
    client.create_users(names.values())
    for side in ("a", "b"):
        client.create_group(f"nbgrader-{ids[side]}", [names[f"student-{side}"]])
        client.create_group(f"formgrade-{ids[side]}", [names[f"teacher-{side}"]])
    admin = HubClient(hub.api_url, hub.admin_token)
    admin.start_server(names["student-a"])
    wait_until(
        lambda: (s := admin.server_status(names["student-a"])) and s["ready"],
        timeout_s=90,
        interval_s=0.25,
        what="the student's server to be ready",
    )
    for side in ("a", "b"):
        sync_team_shares(client, ids[side])
    return names, ids


def open_server(hub: RunningHub, who: str, owner: str) -> int:
    """Log ``who`` in (a fresh browser session) and open ``owner``'s server; return the status."""
    with requests.Session() as browser:
        browser.get(f"{hub.url}/hub/login", timeout=30)
        form = {"username": who, "password": hub.password, "_xsrf": browser.cookies.get("_xsrf")}
        # next=home: a login does not start the user's own server
        answer = browser.post(f"{hub.url}/hub/login?next=%2Fhub%2Fhome", data=form, timeout=30)
        assert answer.status_code == 200, answer.text[:300]
        page = browser.get(f"{hub.url}/user/{owner}/lab", timeout=60)
        return page.status_code


def test_a_teacher_opens_a_students_server_of_their_course(app_hub, courses):
    hub, _client = app_hub
    names, _ids = courses
    assert open_server(hub, names["teacher-a"], names["student-a"]) == 200


def test_a_teacher_of_another_course_cannot_open_it(app_hub, courses):
    hub, _client = app_hub
    names, _ids = courses
    assert open_server(hub, names["teacher-b"], names["student-a"]) == 403
    assert open_server(hub, names["student-b"], names["student-a"]) == 403


def test_a_student_sees_who_can_open_their_server(app_hub, courses):
    _hub, client = app_hub
    names, ids = courses
    assert read_server_sharers(client, names["student-a"]) == [f"group formgrade-{ids['a']}"]


def test_the_team_lists_its_students_servers(app_hub, courses):
    _hub, client = app_hub
    names, _ids = courses
    rows = read_server_rows(client, [names["student-a"], names["student-b"]])
    assert [(r.username, r.state) for r in rows] == [
        (names["student-a"], "running"),
        (names["student-b"], "stopped"),
    ]
    assert rows[0].url == f"/user/{names['student-a']}/"


def test_leaving_the_team_or_the_course_removes_the_access_at_once(app_hub, courses):
    hub, client = app_hub
    names, ids = courses
    team, students = f"formgrade-{ids['a']}", f"nbgrader-{ids['a']}"
    client.remove_group_users(team, [names["teacher-a"]])  # what `coursehub hub sync` does
    try:
        assert open_server(hub, names["teacher-a"], names["student-a"]) == 403
    finally:
        client.add_group_users(team, [names["teacher-a"]])
    assert open_server(hub, names["teacher-a"], names["student-a"]) == 200
    client.remove_group_users(students, [names["student-a"]])
    report = sync_team_shares(client, ids["a"])
    assert report.revoked == [names["student-a"]]
    assert read_shared_owners(client, ids["a"]) == set()
    assert open_server(hub, names["teacher-a"], names["student-a"]) == 403


def test_the_cli_sync_shares_the_students_servers_with_the_team(
    app_hub, database_url, monkeypatch, capsys
):
    """``coursehub hub sync`` runs the course app's after-sync step (lifted to web.aftersync)."""
    from coursehub.catalog.db import make_engine, session_factory
    from coursehub.cli import main
    from coursehub.coursedata.ensure import load_rosters
    from coursehub.web.testing import seed_web_catalog

    hub, client = app_hub
    course_id = seed_web_catalog(database_url)
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", database_url)
    monkeypatch.setenv("CHTEST_HUB_TOKEN", client.session.headers["Authorization"].split()[1])
    status = main(["hub", "sync", "--hub-url", hub.api_url, "--token-env", "CHTEST_HUB_TOKEN"])
    assert status == 0, capsys.readouterr()
    engine = make_engine(database_url)
    with session_factory(engine)() as session:
        (roster,) = load_rosters(session, [course_id])
    engine.dispose()
    assert roster.students and read_shared_owners(client, course_id) == set(roster.students)
