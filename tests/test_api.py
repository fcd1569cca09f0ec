"""The JSON API: tokens, operations, errors, and its OpenAPI description."""

from __future__ import annotations

import pytest
import yaml
from openapi_spec_validator import validate

from coursehub.web.testing import api_headers

C = "/api/v1/courses/mlmeca-2025"
TEACHER = api_headers("teacher")


def test_openapi_file_is_valid_and_matches_the_routes(client, app):
    spec = yaml.safe_load(client.get("/api/v1/openapi.yaml").get_data(as_text=True))
    validate(spec)
    documented = {
        (method.upper(), "/api/v1" + path)
        for path, item in spec["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    routed = {
        (method, rule.rule.replace("<", "{").replace(">", "}"))
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith("/api/")
        for method in rule.methods or ()
        if method not in ("HEAD", "OPTIONS")
    }
    assert documented == routed


@pytest.mark.parametrize("scheme", ["token", "Bearer", "bearer"])
def test_token_schemes(client, scheme):
    response = client.get("/api/v1/courses", headers={"Authorization": f"{scheme} tok-teacher"})
    assert response.status_code == 200
    assert [c["course_id"] for c in response.get_json()["courses"]] == ["mlmeca-2025"]


def test_bad_token_is_401_json(client):
    response = client.get("/api/v1/courses", headers={"Authorization": "token nope"})
    assert response.status_code == 401
    assert response.get_json() == {"error": "the token is not valid for this service"}


def test_session_cookie_does_not_authenticate_the_api(client):
    from coursehub.web.testing import IDENTITIES, identity_headers

    response = client.get("/api/v1/courses", headers=identity_headers(IDENTITIES["admin"]))
    assert response.status_code == 401


def test_create_course_then_get_it(client):
    managers = "/api/v1/portals/MECA/managers/tdupont"
    assert client.put(managers, headers=api_headers("admin")).status_code == 200
    body = {
        "code": "NUM2",
        "title": "Numerics 2",
        "year": "2025-2026",
        "portal": "MECA",
        "material": {"git_url": "https://git.example.org/num2.git"},
    }
    created = client.post("/api/v1/courses", json=body, headers=TEACHER)
    assert created.status_code == 201
    assert created.headers["Location"] == "/api/v1/courses/num2-2025"
    course = client.get("/api/v1/courses/num2-2025", headers=TEACHER).get_json()
    assert course["team"][0]["username"] == "tdupont" and course["team"][0]["role"] == "lead"
    assert course["material"]["branch"] == "main" and course["students"] == []


def test_create_course_twice_is_409(client):
    body = {"code": "MLMECA", "title": "Again", "year": "2025-2026", "portal": "MECA"}
    response = client.post("/api/v1/courses", json=body, headers=api_headers("admin"))
    assert response.status_code == 409
    assert "already exists" in response.get_json()["error"]


def test_create_course_with_bad_fields_is_400_with_field_errors(client):
    body = {"code": 3, "extra": 1}
    response = client.post("/api/v1/courses", json=body, headers=api_headers("admin"))
    assert response.status_code == 400
    fields = response.get_json()["fields"]
    assert fields["code"] == "must be a str" and fields["title"] == "is required"
    assert fields["extra"] == "is not a known field"


def test_unknown_portal_is_404(client):
    body = {"code": "X1", "title": "X", "year": "2025-2026", "portal": "NOPE"}
    response = client.post("/api/v1/courses", json=body, headers=api_headers("admin"))
    assert response.status_code == 404
    assert response.get_json() == {"error": "no portal 'NOPE'"}


def test_teacher_may_not_set_a_profile(client):
    response = client.patch(C, json={"profile": "small"}, headers=TEACHER)
    assert response.status_code == 403
    response = client.patch(C, json={"profile": "small"}, headers=api_headers("admin"))
    assert response.status_code == 200
    assert client.get(C, headers=TEACHER).get_json()["profile"]["name"] == "small"


def test_student_sees_the_course_without_students(client):
    course = client.get(C, headers=api_headers("student")).get_json()
    assert "students" not in course and course["team"]
    assert client.get(f"{C}/members", headers=api_headers("student")).status_code == 403


def test_members_add_update_remove(client):
    added = client.post(f"{C}/members", json={"username": "newbie", "group": "G2"}, headers=TEACHER)
    assert added.status_code == 201 and added.get_json()["group"] == "G2"
    again = client.post(
        f"{C}/members", json={"username": "newbie", "role": "grader"}, headers=TEACHER
    )
    assert again.status_code == 200 and again.get_json()["role"] == "grader"
    assert client.delete(f"{C}/members/newbie", headers=TEACHER).status_code == 204
    assert client.delete(f"{C}/members/newbie", headers=TEACHER).status_code == 404
    members = client.get(f"{C}/members", headers=api_headers("grader")).get_json()["members"]
    assert "newbie" not in {m["username"] for m in members}


def test_roster_dry_run_writes_nothing_then_import(client):
    csv = "student_id,last_name,first_name\np2500050,Curie,Marie\n"
    dry = client.post(f"{C}/roster", json={"csv": csv, "dry_run": True}, headers=TEACHER)
    assert dry.status_code == 200
    assert dry.get_json()["applied"] is False
    assert [r["username"] for r in dry.get_json()["additions"]] == ["p2500050"]
    members = client.get(f"{C}/members", headers=TEACHER).get_json()["members"]
    assert "p2500050" not in {m["username"] for m in members}
    done = client.post(f"{C}/roster", json={"csv": csv}, headers=TEACHER)
    assert done.get_json()["applied"] is True
    members = client.get(f"{C}/members", headers=TEACHER).get_json()["members"]
    assert "p2500050" in {m["username"] for m in members}


def test_bad_roster_is_400_with_problems(client):
    csv = "student_id,last_name,first_name\np2500050,,Marie\n"
    response = client.post(f"{C}/roster", json={"csv": csv}, headers=TEACHER)
    assert response.status_code == 400
    assert response.get_json()["problems"] == [
        "row 2, column B (last_name): the last name (Nom) is empty"
    ]
