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
from helpers import PageActions
from material_gitserver import allow_loopback, serve_git, teacher_repo

C = "/api/v1/courses/mlmeca-2025/material"


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "server"
    root.mkdir()
    teacher_repo(root, "mlmeca", {"notebooks/tp1.py": "print(1)\n", "solutions/s.py": "A = 1\n"})
    token = "glpat-" + secrets.token_hex(16)
    with allow_loopback(), serve_git(root, "deploy", token) as base:
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


@pytest.fixture
def with_token(app, repo):
    """The lead set the private repository and its token; a first update published it."""
    client = app.test_client()
    url, token = repo
    body = {"repo": url, "subdir": "notebooks", "credential": f"deploy:{token}"}
    assert client.put(C, json=body, headers=api_headers("lead")).status_code == 200
    assert client.post(C + "/update", headers=api_headers("lead")).status_code == 202
    with app.app_context():
        assert wait_for_update("mlmeca-2025", timeout=60)
    return client, url


def repo_now(client) -> str:
    return client.get(C, headers=api_headers("lead")).get_json()["repo"]


@pytest.mark.parametrize(
    "other",
    [
        "http://127.0.0.1:18341/steal.git",  # another port of the same machine
        "http://git.evil.example/x.git",  # plain http to another host
        "https://git.evil.example/x.git",
    ],
)
def test_every_way_of_setting_the_repository_asks_the_credential_again_for_another_host(
    with_token, other
):
    client, url = with_token
    put = client.put(C, json={"repo": other, "subdir": "notebooks"}, headers=api_headers("teacher"))
    patch = client.patch(
        "/api/v1/courses/mlmeca-2025",
        json={"material": {"git_url": other, "branch": "main", "subpath": "notebooks"}},
        headers=api_headers("teacher"),
    )
    for answer in (put, patch):
        assert answer.status_code == 400, answer.get_json()
        assert "give the credential again" in answer.get_json()["error"]
    pages = PageActions(client)
    form = {"repo": other, "branch": "main", "subdir": "notebooks"}
    page = pages.post_form("/courses/mlmeca-2025/material", "teacher", form)
    assert page.status_code in (400, 409, 422) and "give the credential again" in page.get_data(
        as_text=True
    )
    edit = pages.post_form(
        "/courses/mlmeca-2025/edit",
        "teacher",
        {"title": "Machine learning", "git_url": other, "branch": "main", "subpath": "notebooks"},
    )
    assert "give the credential again" in edit.get_data(as_text=True)
    assert repo_now(client) == url


def test_the_same_host_keeps_the_credential_and_a_dropped_one_lets_the_url_move(with_token):
    client, url = with_token
    patch = client.patch(
        "/api/v1/courses/mlmeca-2025",
        json={"material": {"git_url": url, "branch": "main", "subpath": "notebooks"}},
        headers=api_headers("teacher"),
    )
    assert patch.status_code == 200, patch.get_json()
    body = {"repo": "https://git.evil.example/x.git", "drop_credential": True}
    moved = client.put(C, json=body, headers=api_headers("teacher"))
    assert moved.status_code == 200 and moved.get_json()["credential"] is None


def test_a_loopback_repository_is_refused_by_a_site_that_does_not_allow_it(app):
    client = app.test_client()
    with allow_loopback(""):
        for url in ("http://127.0.0.1:18399/x.git", "http://localhost:22/", "ssh://[::1]/x.git"):
            answer = client.put(C, json={"repo": url}, headers=api_headers("teacher"))
            assert answer.status_code == 400
            assert "is not allowed on this site" in answer.get_json()["error"]


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
