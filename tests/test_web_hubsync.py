"""The web app syncs the catalog into the hub after each change and shows the outcome.

Unit tests of the decision (:func:`plan_hub_sync`, statuses), the app without a
hub (sync off), the app with a hub that does not answer (a closed port: the
change is kept, the course records the error), and, against the real hub
fixture (``integration``), a roster import through the pages and the API.
"""

from __future__ import annotations

import io
import re

import pytest

from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.models.courses import Course
from coursehub.errors import UsageError
from coursehub.hub.hubclient import HubClient
from coursehub.hub.reconcile import SyncReport
from coursehub.web.hubsync import (
    NOT_SYNCED,
    HubSyncOutcome,
    parse_flag,
    plan_hub_sync,
    render_outcome,
)
from coursehub.web.testing import (
    IDENTITIES,
    api_headers,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)
from helpers import free_port

C = "/courses/mlmeca-2025"
TEACHER = identity_headers(IDENTITIES["teacher"])
ROSTER = "N° étudiant;Nom;Prénom;Courriel;Groupe\n{user};Zola;Émile;emile.zola@etu.example.org;G3\n"


# the decision ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({}, "standalone mode"),
        ({"HUB_API_URL": "http://hub:8081/hub/api"}, "standalone mode"),
        ({"HUB_SYNC": "0", "HUB_API_URL": "http://h/hub/api", "HUB_API_TOKEN": "t"}, "turned off"),
        ({"HUB_SYNC": False, "HUB_SYNC_URL": "http://h", "HUB_SYNC_TOKEN": "t"}, "turned off"),
    ],
)
def test_sync_is_off_without_hub_or_when_turned_off(config, reason):
    settings = plan_hub_sync(config)
    assert not settings.enabled and reason in settings.off_reason


def test_service_variables_enable_the_sync_with_bounded_retries():
    config = {"HUB_API_URL": "http://127.0.0.1:8081/hub/api", "HUB_API_TOKEN": "svc"}
    settings = plan_hub_sync(config)
    assert settings.enabled and settings.api_url == "http://127.0.0.1:8081/hub/api"
    assert settings.token == "svc" and "svc" not in repr(settings)
    assert settings.retry().attempts == 2 and settings.retry().timeout_s == 5.0


def test_sync_url_and_token_override_the_service_ones():
    config = {
        "HUB_API_URL": "http://a:8081/hub/api",
        "HUB_API_TOKEN": "svc",
        "HUB_SYNC_URL": "http://b:8000/",
        "HUB_SYNC_TOKEN": "sync",
        "HUB_SYNC_ATTEMPTS": "3",
        "HUB_SYNC_TIMEOUT_S": "2.5",
    }
    settings = plan_hub_sync(config)
    assert (settings.api_url, settings.token) == ("http://b:8000/hub/api", "sync")
    assert (settings.attempts, settings.timeout_s) == (3, 2.5)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"HUB_SYNC_URL": "ftp://hub"}, "not an http(s) URL"),
        ({"HUB_SYNC_ATTEMPTS": 0}, "HUB_SYNC_ATTEMPTS must be >= 1"),
        ({"HUB_SYNC_TIMEOUT_S": -1}, "HUB_SYNC_TIMEOUT_S must be > 0"),
    ],
)
def test_bad_sync_settings_are_usage_errors(extra, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        plan_hub_sync({"HUB_API_URL": "http://h/hub/api", "HUB_API_TOKEN": "t", **extra})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", False),
        ("off", False),
        ("False", False),
        ("", False),
        (0, False),
        ("1", True),
        ("yes", True),
        (True, True),
        (1, True),
    ],
)
def test_parse_flag(value, expected):
    assert parse_flag(value) is expected


def test_render_outcome_per_course_and_for_the_run():
    ids = ["a-2025", "b-2025"]
    refused = SyncReport(requests=3, errors=(("nbgrader-b-2025", "bad name"),))
    assert render_outcome(ids, refused, "a-2025") == "ok"
    assert render_outcome(ids, refused, "b-2025") == "error: nbgrader-b-2025: bad name"
    assert render_outcome(ids, refused, None) == "error: nbgrader-b-2025: bad name"
    assert render_outcome(ids, refused, "gone-2019") == NOT_SYNCED
    down = SyncReport(aborted="hub down")
    assert render_outcome(ids, down, None) == "error: sync interrupted: hub down"
    assert render_outcome(ids, SyncReport(requests=1), None) == "ok"


def test_outcome_header_is_one_ascii_line():
    outcome = HubSyncOutcome("error: groupe\n« G1 »: refusé " + "x" * 300)
    header = outcome.header()
    assert header.isascii() and "\n" not in header and len(header) == 200
    assert header.startswith("error: groupe ? G1 ?: refus?")
    assert outcome.failed and not HubSyncOutcome("ok").failed


# the app -------------------------------------------------------------------------------------


def closed_port_url() -> str:
    """A hub URL on which nothing listens (connection refused at once)."""
    return f"http://127.0.0.1:{free_port()}/hub/api"


@pytest.fixture
def catalog_url(tmp_path, sqlite_template):
    import shutil

    path = tmp_path / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite:///{path}"
    seed_web_catalog(url)
    return url


@pytest.fixture
def make_app(catalog_url):
    apps = []

    def make(**overrides):
        app = make_test_app(catalog_url, WTF_CSRF_ENABLED=False, **overrides)
        apps.append(app)
        return app

    yield make
    for app in apps:
        dispose_app(app)


def import_roster(client, user: str):
    """Upload a one-student roster through the pages, then confirm it; return the answer."""
    text = ROSTER.format(user=user).encode("utf-8")
    data = {
        "roster": (io.BytesIO(text), "roster.csv"),
        "mode": "add",
        "username_rule": "student_id",
    }
    preview = client.post(
        f"{C}/roster", data=data, headers=TEACHER, content_type="multipart/form-data"
    )
    assert preview.status_code == 200, preview.get_data(as_text=True)[:500]
    payload = re.search(r'name="payload" type="hidden" value="([^"]+)"', preview.get_data(True))
    assert payload
    return client.post(
        f"{C}/roster/confirm",
        data={"payload": payload.group(1)},
        headers=TEACHER,
        follow_redirects=True,
    )


def sync_status(catalog_url: str, course_id: str = "mlmeca-2025"):
    engine = make_engine(catalog_url)
    try:
        with session_scope(engine) as session:
            course = session.query(Course).filter_by(course_id=course_id).one()
            return course.last_sync_status, course.last_sync_at
    finally:
        engine.dispose()


def test_without_hub_nothing_is_attempted_and_the_page_says_off(make_app, catalog_url):
    client = make_app().test_client()
    page = import_roster(client, "p2500077").get_data(as_text=True)
    assert "Roster imported: 1 added" in page and "p2500077" in page
    assert "Last hub sync</dt>\n      <dd>never · sync is off: no hub API URL" in page
    assert "Sync now" not in page and sync_status(catalog_url) == (None, None)
    added = client.post(
        f"/api/v1{C}/members", json={"username": "p2500078"}, headers=api_headers("teacher")
    )
    assert added.status_code == 201
    assert added.get_json()["hub_sync"] == {"status": "off", "at": None}
    assert added.headers["Coursehub-Hub-Sync"] == "off"


def test_sync_now_without_hub_says_off(make_app):
    client = make_app().test_client()
    done = client.post(f"{C}/sync", headers=TEACHER, follow_redirects=True)
    assert "Hub sync is off: no hub API URL and token" in done.get_data(as_text=True)
    api = client.post(f"/api/v1{C}/sync", headers=api_headers("admin"))
    assert api.status_code == 200 and api.get_json()["hub_sync"]["status"] == "off"


def test_unreachable_hub_keeps_the_import_and_records_the_error(make_app, catalog_url):
    app = make_app(HUB_SYNC_URL=closed_port_url(), HUB_SYNC_TOKEN="t", HUB_SYNC_ATTEMPTS=1)
    client = app.test_client()
    response = import_roster(client, "p2500077")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "Roster imported: 1 added" in page and "p2500077" in page
    saved = "Saved, but the hub is not up to date: error: sync interrupted: reading the hub: "
    assert saved + "JupyterHub at" in page
    status, at = sync_status(catalog_url)
    assert status.startswith(
        "error: sync interrupted: reading the hub: JupyterHub at http://127.0.0.1:"
    )
    assert "is unreachable" in status and at is not None
    assert sync_status(catalog_url, "other-2025") == (None, None)  # only the edited course
    assert f"{at:%Y-%m-%d %H:%M} UTC · error: sync interrupted" in page
    assert "Sync now" in page


def test_unreachable_hub_through_the_api_answers_the_change_with_the_error(make_app):
    client = make_app(HUB_SYNC_URL=closed_port_url(), HUB_SYNC_TOKEN="t").test_client()
    headers = api_headers("teacher")
    body = {"csv": ROSTER.format(user="p2500066")}
    done = client.post(f"/api/v1{C}/roster", json=body, headers=headers)
    assert done.status_code == 200 and done.get_json()["applied"] is True
    assert done.get_json()["hub_sync"]["status"].startswith("error: sync interrupted")
    removed = client.delete(f"/api/v1{C}/members/p2500066", headers=headers)
    assert removed.status_code == 204
    assert removed.headers["Coursehub-Hub-Sync"].startswith("error: sync interrupted")
    course = client.get(f"/api/v1{C}", headers=headers).get_json()
    assert course["last_sync_status"].startswith("error: sync interrupted")
    assert "p2500066" not in {m["username"] for m in course["students"]}


# against the real hub ------------------------------------------------------------------------


@pytest.fixture
def hub_changes(live_hub):
    """Delete, after the test, the hub users and groups that appeared during it."""
    admin = HubClient(live_hub.api_url, live_hub.admin_token)
    users = {u["name"] for u in admin.list_users()}
    groups = {g["name"] for g in admin.list_groups()}
    yield admin
    live_hub.ensure_running()
    for group in admin.list_groups():
        if group["name"] not in groups:
            admin.delete_group(group["name"])
    for user in admin.list_users():
        if user["name"] not in users:
            admin.delete_user(user["name"])
    admin.close()


@pytest.mark.integration
def test_roster_import_creates_the_students_on_the_hub(
    live_hub, hub_changes, make_app, catalog_url
):
    app = make_app(HUB_SYNC_URL=live_hub.url, HUB_SYNC_TOKEN=live_hub.token)
    client = app.test_client()
    page = import_roster(client, "p2500077").get_data(as_text=True)
    assert "Roster imported: 1 added" in page and "not up to date" not in page
    status, at = sync_status(catalog_url)
    assert status == "ok" and f"{at:%Y-%m-%d %H:%M} UTC · ok" in page
    groups = {g["name"]: g for g in hub_changes.list_groups()}
    students = set(groups["nbgrader-mlmeca-2025"]["users"])
    assert {"p2500077", "p2500001", "p2500004"} <= students
    assert "tdupont" in groups["formgrade-mlmeca-2025"]["users"]
    assert "p2500077" in {u["name"] for u in hub_changes.list_users()}
    removed = client.delete(f"/api/v1{C}/members/p2500077", headers=api_headers("teacher"))
    assert removed.status_code == 204 and removed.headers["Coursehub-Hub-Sync"] == "ok"
    after = {g["name"]: g for g in hub_changes.list_groups()}
    assert "p2500077" not in after["nbgrader-mlmeca-2025"]["users"]


@pytest.mark.integration
def test_refused_token_is_recorded_then_sync_now_repairs(
    live_hub, hub_changes, make_app, catalog_url
):
    app = make_app(HUB_SYNC_URL=live_hub.api_url, HUB_SYNC_TOKEN="not-a-token")
    client = app.test_client()
    added = client.post(
        f"/api/v1{C}/members", json={"username": "p2500055"}, headers=api_headers("teacher")
    )
    assert added.status_code == 201
    status = added.get_json()["hub_sync"]["status"]
    assert status.startswith("error: sync interrupted: reading the hub: hub API GET /groups/")
    assert ": 403 " in status
    assert sync_status(catalog_url)[0] == status
    assert "p2500055" not in {u["name"] for u in hub_changes.list_users()}
    fixed = make_app(HUB_SYNC_URL=live_hub.api_url, HUB_SYNC_TOKEN=live_hub.token)
    done = fixed.test_client().post(f"{C}/sync", headers=TEACHER, follow_redirects=True)
    assert "Hub sync: ok." in done.get_data(as_text=True)
    assert "p2500055" in {u["name"] for u in hub_changes.list_users()}
