"""A course's team profile through the command line, the JSON API and the course form."""

from __future__ import annotations

import json

import yaml

from coursehub.cli import main
from coursehub.web.testing import api_headers
from helpers import PageActions

C = "/api/v1/courses/mlmeca-2025"
ADMIN = api_headers("admin")


def run(capsys, url, *argv):
    status = main([*argv, "--database-url", url])
    out, err = capsys.readouterr()
    return status, out, err


# --- command line --------------------------------------------------------------------------


def test_the_cli_creates_sets_shows_and_clears_a_team_profile(database_url, capsys):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    capsys.readouterr()
    argv = ("course", "create", "NUM1", "--title", "N", "--year", "2025-2026", "--portal", "MECA")
    status, out, err = run(capsys, database_url, *argv, "--team-profile", "gpu-lstm")
    assert (status, out) == (0, "num1-2025\n"), err
    shown = json.loads(run(capsys, database_url, "course", "show", "num1-2025", "--json")[1])
    assert (shown["profile"], shown["team_profile"]) == (None, "gpu-lstm")
    status, out, _ = run(
        capsys, database_url, "course", "profile", "mlmeca-2025", "--team-profile", "small"
    )
    assert out == "course mlmeca-2025: profile gpu-lstm, team profile small\n"
    status, out, _ = run(
        capsys, database_url, "course", "profile", "mlmeca-2025", "--team-profile", ""
    )
    assert out == "course mlmeca-2025: profile gpu-lstm, team profile -\n"


def test_the_cli_refuses_an_unknown_team_profile_in_one_line(database_url, capsys):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    argv = ("course", "profile", "mlmeca-2025", "--team-profile", "huge")
    status, _, err = run(capsys, database_url, *argv)
    assert status == 2 and err == "coursehub: error: no resource profile 'huge'\n"
    shown = json.loads(run(capsys, database_url, "course", "show", "mlmeca-2025", "--json")[1])
    assert shown["team_profile"] is None


# --- API -----------------------------------------------------------------------------------


def test_the_api_sets_shows_and_clears_the_team_profile(client):
    assert client.get(C, headers=ADMIN).get_json()["team_profile"] is None
    assert client.patch(C, json={"team_profile": "small"}, headers=ADMIN).status_code == 200
    course = client.get(C, headers=ADMIN).get_json()
    assert (course["profile"]["name"], course["team_profile"]["name"]) == ("gpu-lstm", "small")
    assert course["team_profile"]["mem_limit"] == 2 * 1024**3
    assert client.patch(C, json={"team_profile": None}, headers=ADMIN).status_code == 200
    assert client.get(C, headers=ADMIN).get_json()["team_profile"] is None


def test_the_api_refuses_a_teacher_a_bad_type_and_an_unknown_team_profile(client):
    teacher = client.patch(C, json={"team_profile": "small"}, headers=api_headers("teacher"))
    assert teacher.status_code == 403
    typed = client.patch(C, json={"team_profile": 4}, headers=ADMIN)
    assert (
        typed.status_code == 400 and typed.get_json()["fields"]["team_profile"] == "must be a str"
    )
    unknown = client.patch(C, json={"team_profile": "huge"}, headers=ADMIN)
    assert unknown.status_code == 404
    assert unknown.get_json() == {"error": "no resource profile 'huge'"}


def test_a_course_created_through_the_api_keeps_its_team_profile(client):
    body = {"code": "NUM2", "title": "N", "year": "2025-2026", "portal": "MECA"}
    body |= {"profile": "small", "team_profile": "gpu-lstm"}
    assert client.post("/api/v1/courses", json=body, headers=ADMIN).status_code == 201
    course = client.get("/api/v1/courses/num2-2025", headers=ADMIN).get_json()
    assert (course["profile"]["name"], course["team_profile"]["name"]) == ("small", "gpu-lstm")


def test_the_openapi_description_documents_the_team_profile(client):
    spec = yaml.safe_load(client.get("/api/v1/openapi.yaml").get_data(as_text=True))
    schemas = spec["components"]["schemas"]
    assert "team_profile" in schemas["Course"]["allOf"][1]["required"]
    for name in ("NewCourse", "CourseChanges", "CourseAdmin"):
        assert "team_profile" in schemas[name]["properties"], name


# --- the course form -----------------------------------------------------------------------


def _edit(client, **fields):
    data = {"title": "Machine learning for mechanics", "portal": "MECA", "profile": "gpu-lstm"}
    data |= {"branch": "main", "subpath": "notebooks", **fields}
    return PageActions(client).post_form("/courses/mlmeca-2025/edit", "admin", data)


def test_the_course_form_sets_the_team_profile_and_the_page_shows_it(client):
    saved = _edit(client, team_profile="small")
    assert saved.status_code == 302, saved.get_data(as_text=True)
    page = PageActions(client).text("/courses/mlmeca-2025/", "teacher")
    assert "Teaching team: profile small (1 CPU, 2.0 GiB, 1 threads)" in page
    form = PageActions(client).text("/courses/mlmeca-2025/edit", "admin")
    assert '<option selected value="small">small</option>' in form


def test_the_course_form_refuses_an_unknown_team_profile_naming_the_field(client):
    refused = _edit(client, team_profile="huge")
    text = refused.get_data(as_text=True)
    assert refused.status_code in (400, 422)
    assert "Team resource profile: no resource profile &#39;huge&#39;" in text
    assert (
        PageActions(client)
        .text("/courses/mlmeca-2025/", "teacher")
        .count("Teaching team: the students' limits.")
        == 1
    )


def test_only_admins_see_the_team_profile_field(client):
    assert 'name="team_profile"' in PageActions(client).text("/courses/mlmeca-2025/edit", "admin")
    teacher = PageActions(client).text("/courses/mlmeca-2025/edit", "teacher")
    assert 'name="team_profile"' not in teacher
