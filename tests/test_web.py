"""The course web app: factory, configuration, sign-in, CSRF, error pages, pages, roster import."""

from __future__ import annotations

import html
import json
import re

import pytest

from coursehub.catalog.errors import SchemaError
from coursehub.errors import UsageError
from coursehub.web.app import create_app
from coursehub.web.config import plan_auth_mode, plan_prefix, read_hub_env
from coursehub.web.identity import Identity, identity_from_hub
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
)
from helpers import csrf_token

C = "/courses/mlmeca-2025"
TEACHER = identity_headers(IDENTITIES["teacher"])
STUDENT = identity_headers(IDENTITIES["student"])

ROSTER = (
    "N° étudiant;Nom;Prénom;Courriel;Groupe\n"
    "p2500001;Lefèvre;Anaïs;anais.lefevre@etu.example.org;G1\n"
    "p2500099;Zola;Émile;emile.zola@etu.example.org;G3\n"
)


# configuration -------------------------------------------------------------------------------


def test_read_hub_env_keeps_only_set_variables():
    env = {"JUPYTERHUB_API_TOKEN": "t", "JUPYTERHUB_SERVICE_PREFIX": "/services/ch/", "X": "1"}
    assert read_hub_env(env) == {"HUB_API_TOKEN": "t", "HUB_SERVICE_PREFIX": "/services/ch/"}


@pytest.mark.parametrize(
    ("config", "testing", "mode"),
    [
        ({"HUB_API_TOKEN": "t", "HUB_CLIENT_ID": "service-ch"}, False, "hub"),
        ({"DEV_USER": "alice"}, False, "dev"),
        ({}, True, "test"),
    ],
)
def test_plan_auth_mode(config, testing, mode):
    assert plan_auth_mode(config, testing) == mode


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "COURSEHUB_DEV_USER=NAME"),
        ({"HUB_API_TOKEN": "t", "DEV_USER": "alice"}, "development mode is for standalone"),
        ({"HUB_API_TOKEN": "t"}, "JUPYTERHUB_CLIENT_ID is missing"),
    ],
)
def test_plan_auth_mode_refuses(config, message):
    with pytest.raises(UsageError, match=message):
        plan_auth_mode(config, testing=False)


def test_plan_prefix():
    assert plan_prefix({}) == "/"
    assert plan_prefix({"HUB_SERVICE_PREFIX": "/services/coursehub"}) == "/services/coursehub/"


def test_app_refuses_to_start_without_hub_or_dev_user(database_url, monkeypatch):
    monkeypatch.delenv("COURSEHUB_DEV_USER", raising=False)
    with pytest.raises(UsageError, match="no way to identify users"):
        create_app({"DATABASE_URL": database_url}, environ={})


def test_app_refuses_an_empty_database(blank_database_url):
    with pytest.raises(SchemaError, match="coursehub db upgrade"):
        create_app({"DATABASE_URL": blank_database_url, "DEV_USER": "alice"}, environ={})


def test_config_layers_env_then_hub_then_test_overrides(database_url, monkeypatch):
    monkeypatch.setenv("COURSEHUB_DEV_USER", "alice")
    monkeypatch.setenv("COURSEHUB_DEV_ADMIN", "1")
    monkeypatch.setenv("COURSEHUB_IDENTITY_MAX_AGE_S", "60")
    app = create_app({"DATABASE_URL": database_url, "IDENTITY_MAX_AGE_S": 30}, environ={})
    try:
        assert app.config["DEV_USER"] == "alice" and app.config["DEV_ADMIN"] == 1
        assert app.config["IDENTITY_MAX_AGE_S"] == 30
    finally:
        dispose_app(app)


def test_hub_mode_serves_under_the_service_prefix(database_url):
    environ = {
        "JUPYTERHUB_API_TOKEN": "secret",
        "JUPYTERHUB_CLIENT_ID": "service-coursehub",
        "JUPYTERHUB_SERVICE_NAME": "coursehub",
        "JUPYTERHUB_SERVICE_PREFIX": "/services/coursehub/",
        "JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api",
    }
    app = create_app({"DATABASE_URL": database_url}, environ=environ)
    try:
        client = app.test_client()
        page = client.get("/services/coursehub/")
        assert page.status_code == 302
        assert page.location == "/services/coursehub/login?next=/services/coursehub/"
        login = client.get("/services/coursehub/login?next=/services/coursehub/")
        assert login.status_code == 302
        target = login.location
        assert target.startswith("/hub/api/oauth2/authorize?client_id=service-coursehub")
        assert "code_challenge_method=S256" in target and "state=" in target
        assert client.get("/elsewhere").status_code == 404
    finally:
        dispose_app(app)


def test_oauth_callback_checks_the_state(database_url):
    environ = {"JUPYTERHUB_API_TOKEN": "secret", "JUPYTERHUB_CLIENT_ID": "service-coursehub"}
    app = create_app({"DATABASE_URL": database_url}, environ=environ)
    try:
        client = app.test_client()
        client.get("/login")
        response = client.get("/oauth_callback?code=abc&state=forged")
        assert response.status_code == 403
        assert "does not match" in response.get_data(as_text=True)
    finally:
        dispose_app(app)


def test_identity_from_hub_model():
    model = {"kind": "user", "name": "Alice", "admin": True, "groups": ["teachers", "b"]}
    assert identity_from_hub(model) == Identity("alice", True, ("b", "teachers"))
    assert identity_from_hub({"kind": "service", "name": "sync"}) is None
    assert identity_from_hub(None) is None


def test_test_header_is_ignored_outside_testing(database_url):
    app = create_app({"DATABASE_URL": database_url, "DEV_USER": "bob"}, environ={})
    try:
        page = app.test_client().get("/", headers=identity_headers(Identity("root", admin=True)))
        assert page.status_code == 200
        assert "bob" in page.get_data(as_text=True) and ">admin<" not in page.get_data(as_text=True)
    finally:
        dispose_app(app)


# CSRF and errors ---------------------------------------------------------------------------------


def test_forms_refuse_a_post_without_csrf_token(client):
    response = client.post(f"{C}/groups", data={"name": "G9", "kind": "TD"}, headers=TEACHER)
    assert response.status_code == 400
    assert "CSRF" in response.get_data(as_text=True)
    assert "G9" not in client.get(f"{C}/", headers=TEACHER).get_data(as_text=True)


def test_group_form_with_csrf_token_adds_the_group(client):
    token = csrf_token(client.get(f"{C}/groups", headers=TEACHER).get_data(as_text=True))
    data = {"name": "G9", "kind": "TP", "csrf_token": token}
    response = client.post(f"{C}/groups", data=data, headers=TEACHER, follow_redirects=True)
    assert response.status_code == 200
    assert "Group G9 added." in response.get_data(as_text=True)
    assert "<td>G9</td><td>TP</td>" in client.get(f"{C}/", headers=TEACHER).get_data(as_text=True)


def test_service_error_is_shown_on_the_form(client):
    token = csrf_token(client.get(f"{C}/groups", headers=TEACHER).get_data(as_text=True))
    response = client.post(
        f"{C}/groups", data={"name": "G1", "kind": "TD", "csrf_token": token}, headers=TEACHER
    )
    assert response.status_code == 400
    assert "already has a group G1" in response.get_data(as_text=True)


def test_unexpected_error_gives_a_plain_500_page_and_is_logged(app, caplog, monkeypatch):
    import coursehub.web.views.browse as browse

    def broken() -> None:
        raise RuntimeError("database on fire")

    monkeypatch.setattr(browse, "my_courses", broken)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    response = app.test_client().get("/", headers=TEACHER)
    assert response.status_code == 500
    body = response.get_data(as_text=True)
    assert "has been logged" in body and "Traceback" not in body and "on fire" not in body
    assert "database on fire" in caplog.text


def test_unknown_course_is_a_404_page(client):
    response = client.get("/courses/nope-2025/", headers=TEACHER)
    assert response.status_code == 404
    assert "no course 'nope-2025'" in html.unescape(response.get_data(as_text=True))


# pages -------------------------------------------------------------------------------------------


def test_course_page_for_the_team_lists_students(client):
    body = client.get(f"{C}/", headers=TEACHER).get_data(as_text=True)
    for text in ("Teaching team", "Buffat", "p2500003", "gpu-lstm", "mlmeca.git", "never"):
        assert text in body
    assert 'href="/courses/mlmeca-2025/edit"' in body


def test_course_page_for_a_student_hides_other_students(client):
    body = client.get(f"{C}/", headers=STUDENT).get_data(as_text=True)
    assert "Buffat" in body and "group G1" in body
    for other in ("p2500002", "p2500003", "Moreau", "Ølsen"):
        assert other not in body
    assert "/edit" not in body


def test_browse_shows_only_the_users_courses(client):
    other = identity_headers(IDENTITIES["other_teacher"])
    body = client.get("/", headers=other).get_data(as_text=True)
    assert "other-2025" in body and "mlmeca-2025" not in body
    body = client.get("/years/2025-2026/INFO/", headers=other).get_data(as_text=True)
    assert "Another course" in body


def test_a_teacher_who_manages_no_portal_is_told_who_creates_courses(client):
    refused = client.get("/courses/new", headers=identity_headers(IDENTITIES["other_teacher"]))
    assert refused.status_code == 403
    text = html.unescape(refused.get_data(as_text=True))
    assert "only an admin or a manager of a portal can create courses" in text
    assert "INFO: none yet; MECA: none yet" in text and "hub group" not in text


def test_a_site_may_still_let_a_hub_group_create_courses_in_every_portal(app, database_url):
    # as COURSEHUB_COURSE_CREATOR_GROUPS=teachers gives it: a comma-separated string
    site = make_test_app(database_url, COURSE_CREATOR_GROUPS="teachers")
    try:
        headers = identity_headers(IDENTITIES["other_teacher"])  # in the hub group "teachers"
        page = site.test_client().get("/courses/new", headers=headers)
        assert page.status_code == 200
        assert re.findall(r'<option value="(\w+)"', page.get_data(as_text=True)).count("MECA") == 1
    finally:
        dispose_app(site)


def test_a_portal_manager_creates_a_course_and_becomes_its_lead(client, app):
    admin = {"Authorization": "token tok-admin"}
    assert client.put("/api/v1/portals/INFO/managers/oteacher", headers=admin).status_code == 200
    headers = identity_headers(IDENTITIES["other_teacher"])
    token = csrf_token(client.get("/courses/new", headers=headers).get_data(as_text=True))
    data = {
        "code": "NUM1",
        "year": "2025-2026",
        "portal": "INFO",
        "title": "Numerics",
        "git_url": "https://git.example.org/num1.git",
        "branch": "main",
        "csrf_token": token,
    }
    response = client.post("/courses/new", data=data, headers=headers, follow_redirects=True)
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert "Course num1-2025 created." in body and "num1.git" in body
    assert re.search(r"oteacher</td><td>lead", body)


def test_find_a_person_is_limited_to_the_searchers_courses(client):
    other = identity_headers(IDENTITIES["other_teacher"])
    assert "p2500001" not in client.get("/people/?q=p2500", headers=other).get_data(as_text=True)
    body = client.get("/people/?q=p2500", headers=TEACHER).get_data(as_text=True)
    assert "p2500001" in body and "mlmeca-2025" in body


def test_admin_edits_a_profile(client):
    admin = identity_headers(IDENTITIES["admin"])
    token = csrf_token(client.get("/profiles/small/edit", headers=admin).get_data(as_text=True))
    data = {
        "name": "small",
        "cpu_limit": "1.5",
        "mem_limit": "3G",
        "gpus": "0",
        "jobs_per_gpu": "1",
        "csrf_token": token,
    }
    response = client.post("/profiles/small/edit", data=data, headers=admin, follow_redirects=True)
    assert response.status_code == 200
    assert "Profile small saved." in response.get_data(as_text=True)
    assert '<td class="num">1.5</td><td class="num">3.0</td>' in response.get_data(as_text=True)


def test_admin_gives_a_gpu_profile_a_memory_budget_per_job(client):
    admin = identity_headers(IDENTITIES["admin"])
    token = csrf_token(client.get("/profiles/small/edit", headers=admin).get_data(as_text=True))
    data = {"name": "small", "cpu_limit": "1", "mem_limit": "2G", "gpus": "1"}
    data |= {"jobs_per_gpu": "10", "gpu_mem_limit": "1.5G", "csrf_token": token}
    response = client.post("/profiles/small/edit", data=data, headers=admin, follow_redirects=True)
    assert "Profile small saved." in response.get_data(as_text=True)
    page = client.get("/profiles/small/edit", headers=admin).get_data(as_text=True)
    assert 'value="1536M"' in page
    data |= {"gpus": "0"}
    response = client.post("/profiles/small/edit", data=data, headers=admin)
    assert "a GPU memory budget needs a GPU" in response.get_data(as_text=True)


# roster import ------------------------------------------------------------------------------------


def upload(client, text: str, **fields: str):
    import io

    token = csrf_token(client.get(f"{C}/roster", headers=TEACHER).get_data(as_text=True))
    data = {
        "roster": (io.BytesIO(text.encode("utf-8")), "roster.csv"),
        "mode": "add",
        "username_rule": "student_id",
        "csrf_token": token,
        **fields,
    }
    return client.post(
        f"{C}/roster", data=data, headers=TEACHER, content_type="multipart/form-data"
    )


def test_roster_upload_previews_then_confirm_applies(client):
    preview = upload(client, ROSTER, mode="sync")
    body = preview.get_data(as_text=True)
    assert preview.status_code == 200 and "Nothing has been written yet" in body
    assert "p2500099" in body and "new groups: G3" in body
    assert "p2500004" in body  # removed in sync mode
    assert "p2500099" not in client.get(f"{C}/", headers=TEACHER).get_data(as_text=True)
    payload = re.search(r'name="payload" type="hidden" value="([^"]+)"', body) or re.search(
        r'id="payload" name="payload" type="hidden" value="([^"]+)"', body
    )
    assert payload
    data = {"payload": payload.group(1), "csrf_token": csrf_token(body)}
    done = client.post(f"{C}/roster/confirm", data=data, headers=TEACHER, follow_redirects=True)
    page = done.get_data(as_text=True)
    assert "Roster imported: 1 added, 1 updated, 3 removed." in page
    assert "p2500099" in page and "p2500004" not in page


def test_roster_confirm_refuses_a_tampered_payload(client):
    body = upload(client, ROSTER).get_data(as_text=True)
    payload = re.search(r'name="payload" type="hidden" value="([^"]+)"', body)
    assert payload
    data = {"payload": payload.group(1)[:-2] + "xx", "csrf_token": csrf_token(body)}
    response = client.post(f"{C}/roster/confirm", data=data, headers=TEACHER)
    assert response.status_code == 400
    assert "not valid any more" in response.get_data(as_text=True)
    assert "p2500099" not in client.get(f"{C}/", headers=TEACHER).get_data(as_text=True)


def test_roster_confirm_after_the_course_changed_shows_a_new_preview(client, app):
    body = upload(client, ROSTER).get_data(as_text=True)
    payload = re.search(r'name="payload" type="hidden" value="([^"]+)"', body)
    assert payload
    api = app.test_client()
    api_headers = {"Authorization": "token tok-teacher"}
    added = api.post(f"/api/v1{C}/members", json={"username": "p2500099"}, headers=api_headers)
    assert added.status_code == 201
    data = {"payload": payload.group(1), "csrf_token": csrf_token(body)}
    response = client.post(f"{C}/roster/confirm", data=data, headers=TEACHER)
    assert response.status_code == 409
    assert "changed since the preview" in response.get_data(as_text=True)


def test_bad_roster_shows_row_and_column_errors_and_writes_nothing(client):
    bad = "N° étudiant;Nom;Prénom;Courriel\np2500077;;Jean;not-an-email\n"
    response = upload(client, bad)
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "row 2, column B (Nom): the last name (Nom) is empty" in body
    assert "row 2, column D (Courriel)" in body
    assert "p2500077" not in client.get(f"{C}/", headers=TEACHER).get_data(as_text=True)


def test_identity_header_round_trip():
    identity = Identity("alice", True, ("teachers",))
    header = identity_headers(identity)["X-Coursehub-Test-User"]
    assert Identity.from_session(json.loads(header)) == identity


@pytest.mark.parametrize(
    ("n_items", "page", "expected"),
    [(0, 1, (1, 1)), (1500, 1, (1, 30)), (1500, 99, (30, 30)), (51, 0, (1, 2))],
)
def test_plan_pages(n_items, page, expected):
    from coursehub.catalog.readmodel import plan_pages

    assert plan_pages(n_items, page, size=50) == expected


@pytest.mark.parametrize(
    "who, shown",
    [
        ("student", False),
        ("grader", True),
        ("teacher", True),
        ("other_teacher", True),
        ("admin", True),
    ],
)
def test_find_a_person_link_only_for_those_who_may_search(client, who, shown):
    page = client.get("/", headers=identity_headers(IDENTITIES[who])).get_data(as_text=True)
    assert ("Find a person" in page) is shown
    status = client.get("/people/", headers=identity_headers(IDENTITIES[who])).status_code
    assert (status == 200) is shown


def test_an_unknown_lead_is_the_lead_fields_error_not_the_course_codes(client):
    admin = identity_headers(IDENTITIES["admin"])
    token = csrf_token(client.get("/courses/new", headers=admin).get_data(as_text=True))
    data = {
        "code": "NUM2",
        "year": "2025-2026",
        "portal": "INFO",
        "title": "Numerics 2",
        "lead": "jdoe-nobody",
        "csrf_token": token,
    }
    response = client.post("/courses/new", data=data, headers=admin)
    assert response.status_code == 400
    body = html.unescape(response.get_data(as_text=True))
    lead_field = re.search(r'<input[^>]*name="lead"[^>]*>', body)
    code_field = re.search(r'<input[^>]*name="code"[^>]*>', body)
    assert lead_field and code_field
    assert 'aria-invalid="true"' in lead_field.group(0), lead_field.group(0)
    assert 'aria-invalid="true"' not in code_field.group(0), code_field.group(0)
    assert "lead 'jdoe-nobody' is not a known person" in body


def test_the_profiles_page_names_the_courses_that_use_a_profile_for_their_team(
    client, database_url
):
    from sqlalchemy import create_engine, select
    from sqlalchemy.orm import Session

    from coursehub.catalog.models.courses import Course, ResourceProfile

    engine = create_engine(database_url)
    with Session(engine) as session:
        course = session.scalars(select(Course).where(Course.course_id == "mlmeca-2025")).one()
        team = ResourceProfile(name="teamonly", cpu_limit=4, mem_limit=8 << 30, n_threads=4)
        session.add(team)
        course.team_profile = team
        session.commit()
    engine.dispose()
    body = client.get("/profiles/", headers=identity_headers(IDENTITIES["admin"])).get_data(
        as_text=True
    )
    row = re.search(r"teamonly</a></td>.*?</tr>", body, re.S)
    assert row and "mlmeca-2025 (team)" in row.group(0)
