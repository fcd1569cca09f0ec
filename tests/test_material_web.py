"""The material in the course app: the API, the course page's section, "Update now"."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

import pytest

from coursehub.web.materialjobs import wait_for_update
from coursehub.web.testing import (
    IDENTITIES,
    api_headers,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)
from material_gitserver import serve_git, teacher_repo

C = "/api/v1/courses/mlmeca-2025/material"


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "server"
    root.mkdir()
    teacher_repo(root, "mlmeca", {"notebooks/tp1.py": "print(1)\n", "solutions/s.py": "A = 1\n"})
    token = "glpat-" + secrets.token_hex(16)
    with serve_git(root, "deploy", token) as base:
        yield f"{base}/mlmeca.git", token


@pytest.fixture
def app(database_url):
    folder = Path(tempfile.mkdtemp(prefix="chmat-"))
    seed_web_catalog(database_url)
    application = make_test_app(database_url, MATERIAL_DIR=str(folder / "material"))
    yield application
    dispose_app(application)
    shutil.rmtree(folder, ignore_errors=True)


def test_the_team_sets_a_private_repository_and_updates_it_in_the_background(app, repo):
    client = app.test_client()
    url, token = repo
    body = {"repo": url, "subdir": "notebooks", "credential": f"deploy:{token}"}
    answer = client.put(C, json=body, headers=api_headers("teacher"))
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["credential"] == "token" and token not in answer.get_data(as_text=True)
    started = client.post(C + "/update", headers=api_headers("grader"))
    assert started.status_code == 202 and started.get_json()["state"] == "updating"
    with app.app_context():
        assert wait_for_update("mlmeca-2025", timeout=60)
    state = client.get(C, headers=api_headers("student")).get_json()
    assert state["state"] == "ok" and "error" not in state
    assert state["pull_link"].startswith("/hub/user-redirect/git-pull?repo=file")
    page = client.get("/courses/mlmeca-2025/", headers=identity_headers(IDENTITIES["student"]))
    text = page.get_data(as_text=True)
    assert "Get the material in my server" in text and state["commit"][:12] in text
    assert token not in text and "Update now" not in text


def test_a_wrong_credential_shows_on_the_course_page(app, repo):
    client = app.test_client()
    url, _token = repo
    body = {"repo": url, "credential": "deploy:glpat-wrongwrongwrong"}
    assert client.put(C, json=body, headers=api_headers("lead")).status_code == 200
    assert client.post(C + "/update", headers=api_headers("lead")).status_code == 202
    with app.app_context():
        assert wait_for_update("mlmeca-2025", timeout=60)
    page = client.get("/courses/mlmeca-2025/", headers=identity_headers(IDENTITIES["lead"]))
    text = page.get_data(as_text=True)
    assert "refused the credential" in text and "glpat-wrong" not in text
    assert "Update now" in text


@pytest.mark.parametrize(
    ("who", "method", "path", "body", "status"),
    [
        ("student", "put", C, {"repo": "https://h/r.git"}, 403),
        ("student", "post", C + "/update", None, 403),
        ("other_teacher", "get", C, None, 403),
        ("teacher", "put", C, {"repo": "https://u:tok@h/r.git"}, 400),
        ("teacher", "put", C, {"repo": "git@h:r.git", "credential": "glpat-12345678"}, 400),
        ("teacher", "put", C, {"repo": "https://h/r.git", "branch": "a..b"}, 400),
        ("other_teacher", "post", "/api/v1/courses/other-2025/material/update", None, 409),
    ],
)
def test_the_api_refuses_what_a_caller_may_not_do_or_a_bad_body(
    app, who, method, path, body, status
):
    client = app.test_client()
    answer = getattr(client, method)(path, json=body, headers=api_headers(who))
    assert answer.status_code == status
    assert "error" in answer.get_json()


def test_students_see_the_materials_state_but_not_its_upstream_or_errors(app, repo):
    client = app.test_client()
    url, _token = repo
    body = {"repo": url, "credential": "deploy:glpat-wrongwrongwrong"}
    assert client.put(C, json=body, headers=api_headers("lead")).status_code == 200
    assert client.post(C + "/update", headers=api_headers("lead")).status_code == 202
    with app.app_context():
        assert wait_for_update("mlmeca-2025", timeout=60)
    student = client.get(C, headers=api_headers("student")).get_json()
    assert student["state"] == "error"
    assert not {"repo", "branch", "subdir", "credential", "error"} & set(student)
    team = client.get(C, headers=api_headers("grader")).get_json()
    assert team["repo"] == url and "refused the credential" in team["error"]
    course = client.get("/api/v1/courses/mlmeca-2025", headers=api_headers("student")).get_json()
    assert course["material"] is None
    page = client.get("/courses/mlmeca-2025/", headers=identity_headers(IDENTITIES["student"]))
    text = page.get_data(as_text=True)
    assert url not in text and "refused the credential" not in text
