"""The weekly budget in the JSON API: the course's, one student's override, their week."""

from __future__ import annotations

import pytest

from coursehub.web.testing import api_headers

BUDGET = "/api/v1/courses/mlmeca-2025/budget"


def test_the_lead_sets_the_budget_and_the_course_shows_it(client):
    answer = client.put(
        BUDGET, json={"cpu_hours": 20, "gpu_hours": 2.5}, headers=api_headers("lead")
    )
    assert answer.status_code == 200
    assert answer.get_json() == {"cpu_hours": 20.0, "gpu_hours": 2.5, "overrides": []}
    course = client.get("/api/v1/courses/mlmeca-2025", headers=api_headers("student")).get_json()
    assert course["budget"] == {"cpu_hours": 20.0, "gpu_hours": 2.5}
    assert client.get(BUDGET, headers=api_headers("student")).status_code == 403
    assert (
        client.put(BUDGET, json={"cpu_hours": 1}, headers=api_headers("grader")).status_code == 403
    )


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"cpu_hours": -1}, "cpu_hours", "cpu_hours: must be more than 0 hours, got -1"),
        ({"cpu_hours": "ten"}, "cpu_hours", "must be a number of hours or null"),
        ({"gpu_hours": 1e9}, "gpu_hours", "gpu_hours: at most 43008 hours a week"),
        ({"gpu_hours": True}, "gpu_hours", "must be a number of hours or null"),
    ],
)
def test_bad_figures_are_a_400_naming_the_field_and_save_nothing(client, body, field, message):
    answer = client.put(BUDGET, json=body, headers=api_headers("teacher"))
    assert answer.status_code == 400
    assert message in answer.get_json()["fields"][field]
    after = client.get(BUDGET, headers=api_headers("teacher")).get_json()
    assert after == {"cpu_hours": None, "gpu_hours": None, "overrides": []}


def test_an_override_and_the_students_week(client):
    client.put(BUDGET, json={"cpu_hours": 10}, headers=api_headers("lead"))
    url = BUDGET + "/students/p2500001"
    answer = client.put(url, json={"cpu_hours": 25}, headers=api_headers("teacher"))
    assert answer.status_code == 200
    assert answer.get_json()["set_by"] == "tdupont"
    week = client.get(url, headers=api_headers("student")).get_json()
    assert (week["cpu_hours"], week["cpu_hours_used"], week["cpu_hours_left"]) == (25.0, 0, 25.0)
    assert "mbuffat" in week["ask"] and week["zone"] == "UTC"
    other = BUDGET + "/students/p2500002"
    assert client.get(other, headers=api_headers("student")).status_code == 403
    assert client.get(url, headers=api_headers("other_student")).status_code == 403
    assert client.put(url, json={}, headers=api_headers("lead")).status_code == 204
    assert client.get(BUDGET, headers=api_headers("grader")).get_json()["overrides"] == []
