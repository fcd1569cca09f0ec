"""The administration API round trips, read-only archived courses, and the readable description."""

from __future__ import annotations

import re

import pytest

from coursehub.web.testing import IDENTITIES, api_headers, identity_headers
from helpers import PageActions

ADMIN = api_headers("admin")
LEAD = api_headers("lead")
C = "/api/v1/courses/mlmeca-2025"


@pytest.fixture
def grading_root(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))


def test_an_admin_creates_a_year_a_portal_with_a_manager_and_the_manager_a_course(client):
    created = client.post(
        "/api/v1/years", json={"label": "2026-2027", "current": True}, headers=ADMIN
    )
    assert created.status_code == 201 and created.get_json()["state"] == "current"
    assert (
        client.post("/api/v1/years", json={"label": "2026-2027"}, headers=ADMIN).status_code == 200
    )
    years = client.get("/api/v1/years", headers=LEAD).get_json()["years"]
    assert [(y["label"], y["state"]) for y in years] == [
        ("2026-2027", "current"),
        ("2025-2026", "open"),
    ]
    portal = client.post(
        "/api/v1/portals",
        json={"code": "PHYS", "title": "Physique", "managers": ["tdupont"]},
        headers=ADMIN,
    )
    assert portal.status_code == 201 and portal.get_json()["managers"] == ["tdupont"]
    renamed = client.patch("/api/v1/portals/PHYS", json={"title": "Physics"}, headers=ADMIN)
    assert renamed.get_json()["title"] == "Physics"
    body = {
        "code": "WAVES",
        "title": "Waves",
        "year": "2026-2027",
        "portal": "PHYS",
        "lead": "mbuffat",
    }
    made = client.post("/api/v1/courses", json=body, headers=api_headers("teacher"))  # tdupont
    assert made.status_code == 201, made.get_json()
    course = client.get("/api/v1/courses/waves-2026", headers=LEAD).get_json()
    assert [m["username"] for m in course["team"]] == ["mbuffat"]
    assert client.put("/api/v1/portals/PHYS/managers/gmartin", headers=ADMIN).status_code == 200
    assert client.delete("/api/v1/portals/PHYS/managers/tdupont", headers=ADMIN).status_code == 204
    portals = client.get("/api/v1/portals", headers=LEAD).get_json()["portals"]
    assert {"code": "PHYS", "title": "Physics", "managers": ["gmartin"]} in portals


def test_a_refused_creation_says_who_may_create_in_that_portal(client):
    client.put("/api/v1/portals/MECA/managers/tdupont", headers=ADMIN)
    body = {"code": "X1", "title": "X", "year": "2025-2026", "portal": "MECA", "lead": "mbuffat"}
    refused = client.post("/api/v1/courses", json=body, headers=api_headers("other_teacher"))
    assert refused.status_code == 403
    assert "a manager of a portal can create courses" in refused.get_json()["error"]
    assert "MECA: tdupont" in refused.get_json()["error"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"label": "2026-2028"}, 400, "the second year the first + 1"),
        ({"label": 2026}, 400, "label: must be a str"),
    ],
)
def test_a_bad_year_is_refused_with_its_reason(client, body, status, message):
    answer = client.post("/api/v1/years", json=body, headers=ADMIN)
    assert answer.status_code == status and message in answer.get_json()["error"]


def test_a_lead_copies_the_course_and_an_archived_year_is_read_only_but_grades_exportable(
    client, grading_root
):
    client.post("/api/v1/years", json={"label": "2026-2027"}, headers=ADMIN)
    copied = client.post(f"{C}/copy", json={"to_year": "2026-2027"}, headers=LEAD)
    assert copied.status_code == 201 and copied.get_json()["leads"] == ["mbuffat"]
    again = client.post(f"{C}/copy", json={"to_year": "2026-2027"}, headers=LEAD)
    assert again.status_code == 409 and "nothing copied" in again.get_json()["error"]
    assert (
        client.post("/api/v1/years/2025-2026/archive", headers=ADMIN).get_json()["state"]
        == "archived"
    )
    for method, path, body in (
        ("PATCH", C, {"title": "New"}),
        ("POST", f"{C}/members", {"username": "p2509999"}),
        ("DELETE", f"{C}/members/p2500004", None),
        ("POST", f"{C}/roster", {"csv": "x"}),
    ):
        answer = client.open(path, method=method, json=body, headers=LEAD)
        assert answer.status_code == 409, (path, answer.get_json())
        assert "academic year 2025-2026 is archived" in answer.get_json()["error"]
    page = PageActions(client).post_form("/courses/mlmeca-2025/edit", "lead", {"title": "x"})
    assert page.status_code == 409 and "read-only" in page.get_data(as_text=True)
    grades = client.get(
        "/courses/mlmeca-2025/grading/grades.csv", headers=identity_headers(IDENTITIES["lead"])
    )
    assert grades.status_code != 409  # reading (exporting) is never refused for being archived
    rolled = client.post(
        "/api/v1/years/2025-2026/rollover", json={"to": "2026-2027"}, headers=ADMIN
    )
    assert rolled.status_code == 409 and "is archived" in rolled.get_json()["error"]


def test_the_openapi_description_reads_as_a_page_without_a_token_or_a_script(client):
    page = client.get("/api/v1/")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert "POST /api/v1/years/{year}/rollover" in text and "Rollover" in text
    body = text.split("<body")[1].replace("http://localhost", "")
    # nothing fetched from elsewhere: no script, no link or source outside the app
    assert "<script" not in text
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", body), body
