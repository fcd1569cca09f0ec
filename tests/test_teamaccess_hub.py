"""The team in its students' servers, live through a real JupyterHub and its shares API.

A hub of this module's own (tests/hubfixture.py's ``RunningHub``) with one more
service, ``coursehub-app``, holding the scopes the rendered configuration
gives the course app (``coursehub-sync`` role, ``shares`` included).
"""

from __future__ import annotations

import html
import re
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
    """Two courses with a teacher each; A has two students, the first with a running server."""
    hub, client = app_hub
    tag = uuid.uuid4().hex[:6]
    roles = ("teacher-a", "student-a", "classmate-a", "teacher-b", "student-b")
    names = {k: f"{k}{tag}" for k in roles}
    ids = {"a": f"a{tag}-2025", "b": f"b{tag}-2025"}
    client.create_users(names.values())
    client.create_group(f"nbgrader-{ids['a']}", [names["student-a"], names["classmate-a"]])
    client.create_group(f"nbgrader-{ids['b']}", [names["student-b"]])
    for side in ("a", "b"):
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


def open_server(hub: RunningHub, who: str, owner: str, consents: list[str] | None = None) -> int:
    """Log ``who`` in (a fresh browser session), open ``owner``'s JupyterLab; return the status.

    The whole OAuth round trip of a browser: ``/user/{owner}/lab`` redirects to
    the hub's ``/hub/api/oauth2/authorize``, whose "Authorize access" page
    (``templates/oauth.html``) is submitted as clicked, then the server's
    ``oauth_callback`` sets its cookie and sends the browser back to the lab.
    The answer is the server's own ``/user/{owner}/api/status`` with that
    cookie (200: the server let ``who`` in), or the first refusal on the way
    (the hub's 403 on the authorize page, the server's 403). Each consent
    page met is appended to ``consents`` (its URL).
    """
    with requests.Session() as browser:
        browser.get(f"{hub.url}/hub/login", timeout=30)
        form = {"username": who, "password": hub.password, "_xsrf": browser.cookies.get("_xsrf")}
        # next=home: a login does not start the user's own server
        answer = browser.post(f"{hub.url}/hub/login?next=%2Fhub%2Fhome", data=form, timeout=30)
        assert answer.status_code == 200, answer.text[:300]
        page = browser.get(f"{hub.url}/user/{owner}/lab", timeout=60)
        if page.status_code == 200 and "/oauth2/authorize" in page.url:
            consent = re.search(r'<form method="post" action="">(.*?)</form>', page.text, re.S)
            assert consent, page.text[:500]
            if consents is not None:
                consents.append(page.url)
            fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', consent[1])
            page = browser.post(
                page.url, data=[(k, html.unescape(v)) for k, v in fields], timeout=60
            )
        if page.status_code != 200:
            return page.status_code
        assert page.url.startswith(f"{hub.url}/user/{owner}/lab"), page.url
        status = browser.get(f"{hub.url}/user/{owner}/api/status", timeout=30)
        return status.status_code


def test_a_teacher_opens_a_students_server_of_their_course(app_hub, courses):
    hub, _client = app_hub
    names, _ids = courses
    consents: list[str] = []
    assert open_server(hub, names["teacher-a"], names["student-a"], consents) == 200
    assert len(consents) == 1  # JupyterHub's "Authorize access" page, clicked
    # a second session: the hub asks no consent again (the first one's token
    # holds the scopes, apihandlers/auth.py needs_oauth_confirm); the server lets the teacher in
    assert open_server(hub, names["teacher-a"], names["student-a"], consents) == 200
    assert len(consents) == 1


def test_a_teacher_of_another_course_and_a_classmate_cannot_open_it(app_hub, courses):
    hub, _client = app_hub
    names, _ids = courses
    assert open_server(hub, names["teacher-b"], names["student-a"]) == 403
    assert open_server(hub, names["classmate-a"], names["student-a"]) == 403
    assert open_server(hub, names["student-b"], names["student-a"]) == 403


def test_a_second_sync_changes_nothing(app_hub, courses):
    _hub, client = app_hub
    _names, ids = courses
    report = sync_team_shares(client, ids["a"])
    assert (report.granted, report.revoked, report.granted_users, report.revoked_users) == (
        [],
        [],
        [],
        [],
    )
    assert report.errors == []


def test_a_student_sees_who_can_open_their_server(app_hub, courses):
    _hub, client = app_hub
    names, ids = courses
    assert read_server_sharers(client, names["student-a"]) == [
        f"group formgrade-{ids['a']}",
        f"user {names['teacher-a']}",
    ]


def test_the_team_lists_its_students_servers(app_hub, courses):
    _hub, client = app_hub
    names, _ids = courses
    rows = read_server_rows(client, [names["student-a"], names["student-b"]])
    assert [(r.username, r.state) for r in rows] == [
        (names["student-a"], "running"),
        (names["student-b"], "stopped"),
    ]
    assert rows[0].url == f"/user/{names['student-a']}/"


def test_the_teams_page_grants_a_new_members_shares_and_leaves_revocations_to_the_sync(
    app_hub, courses
):
    hub, client = app_hub
    names, ids = courses
    team, newcomer = f"formgrade-{ids['a']}", names["teacher-b"]
    newcomer_shares = [(names["classmate-a"], newcomer), (names["student-a"], newcomer)]
    client.add_group_users(team, [newcomer])
    try:
        report = sync_team_shares(client, ids["a"], grants_only=True)  # what the page does
        assert report.granted_users == newcomer_shares and report.errors == []
        assert open_server(hub, newcomer, names["student-a"]) == 200
    finally:
        client.remove_group_users(team, [newcomer])
    report = sync_team_shares(client, ids["a"], grants_only=True)
    assert (report.granted_users, report.revoked_users, report.revoked) == ([], [], [])
    assert f"user {newcomer}" in read_server_sharers(client, names["student-a"])
    report = sync_team_shares(client, ids["a"])  # the sync's own run
    assert report.revoked_users == newcomer_shares
    assert open_server(hub, newcomer, names["student-a"]) == 403


def test_a_removed_teacher_is_refused_once_the_team_change_is_synced(app_hub, courses):
    hub, client = app_hub
    names, ids = courses
    teacher, student, team = names["teacher-a"], names["student-a"], f"formgrade-{ids['a']}"
    shares_of_teacher = [(names["classmate-a"], teacher), (student, teacher)]
    assert open_server(hub, teacher, student) == 200
    client.remove_group_users(team, [teacher])  # what `coursehub hub sync` does, then:
    try:
        report = sync_team_shares(client, ids["a"])  # its after-sync step
        assert report.revoked_users == shares_of_teacher and report.errors == []
        assert read_server_sharers(client, student) == [f"group {team}"]
        assert open_server(hub, teacher, student) == 403
    finally:
        client.add_group_users(team, [teacher])
    report = sync_team_shares(client, ids["a"])
    assert report.granted_users == shares_of_teacher
    assert open_server(hub, teacher, student) == 200


def test_a_student_leaving_the_course_loses_the_teams_shares(app_hub, courses):
    hub, client = app_hub
    names, ids = courses
    teacher, student = names["teacher-a"], names["student-a"]
    client.remove_group_users(f"nbgrader-{ids['a']}", [student])
    report = sync_team_shares(client, ids["a"])
    assert report.revoked == [student] and report.revoked_users == [(student, teacher)]
    assert read_shared_owners(client, ids["a"]) == {names["classmate-a"]}
    assert read_server_sharers(client, student) == []
    assert open_server(hub, teacher, student) == 403


def test_the_cli_sync_shares_the_students_servers_with_the_team(
    app_hub, database_url, monkeypatch, capsys
):
    """``coursehub hub sync`` runs the after-sync step (coursehub.usecases.hub_sync)."""
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
    team = {f"user {name}" for name in roster.team}
    for student in roster.students:  # and with each member of the team
        assert team <= set(read_server_sharers(client, student)), student


def test_the_cli_sync_revokes_the_shares_of_a_teacher_removed_from_the_course(
    app_hub, database_url, monkeypatch, capsys
):
    """A teacher taken out of the catalog: the next ``coursehub hub sync`` revokes their shares."""
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.db import make_engine, session_factory
    from coursehub.catalog.members import remove_member
    from coursehub.cli import main
    from coursehub.coursedata.ensure import load_rosters
    from coursehub.web.testing import seed_web_catalog

    hub, client = app_hub
    course_id = seed_web_catalog(database_url)
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", database_url)
    monkeypatch.setenv("CHTEST_HUB_TOKEN", client.session.headers["Authorization"].split()[1])
    sync = ["hub", "sync", "--hub-url", hub.api_url, "--token-env", "CHTEST_HUB_TOKEN"]
    assert main(sync) == 0, capsys.readouterr()
    engine = make_engine(database_url)
    with session_factory(engine)() as session:
        (roster,) = load_rosters(session, [course_id])
        assert "tdupont" in roster.team
        remove_member(session, get_course(session, course_id), "tdupont")
        session.commit()
    engine.dispose()
    assert "user tdupont" in read_server_sharers(client, sorted(roster.students)[0])
    assert main(sync) == 0, capsys.readouterr()
    for student in roster.students:
        sharers = set(read_server_sharers(client, student))
        assert "user tdupont" not in sharers and f"group formgrade-{course_id}" in sharers
        assert {f"user {name}" for name in roster.team - {"tdupont"}} <= sharers, student
