"""The material's pure parts: URL, branch and folder checks, credentials, git messages, links."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from coursehub.catalog.errors import ValidationError
from coursehub.catalog.material import check_branch, check_repo_url, check_subdir, render_pull_link
from coursehub.errors import UsageError
from coursehub.material.credential import (
    check_credential_fits,
    parse_credential,
    plan_credential_env,
)
from coursehub.material.gitcmd import UNREADABLE, explain_git_error, plan_git_env
from coursehub.material.layout import MaterialLayout
from coursehub.spawn.material import (
    choose_material,
    parse_materials,
    plan_material_env,
    render_pull_path,
)

KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


@pytest.mark.parametrize(
    "url",
    [
        "https://gitlab.example.org/meca/mlmeca.git",
        "git@gitlab.example.org:meca/mlmeca.git",
        "ssh://git@gitlab.example.org:2222/meca/mlmeca.git",
    ],
)
def test_a_plain_repository_url_is_accepted(url):
    assert check_repo_url(f" {url} ") == url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://deploy:glpat-x@gitlab.example.org/r.git", "user name or token"),
        ("https://glpat-x@gitlab.example.org/r.git", "user name or token"),
        ("file:///srv/coursehub/material/private/upstream/other.git", "scheme 'file'"),
        ("ext::sh -c touch% /tmp/pwned", "one line"),
        ("/srv/repo.git", "is not https://"),
        ("--upload-pack=touch", "must not start with '-'"),
        ("", "empty"),
    ],
)
def test_a_repository_url_with_a_secret_or_a_local_transport_is_refused(url, reason):
    with pytest.raises(ValidationError, match=reason):
        check_repo_url(url)


@pytest.mark.parametrize("branch", ["-x", "a..b", "a b", "x.lock", "a/", "~a"])
def test_a_malformed_branch_is_refused(branch):
    with pytest.raises(ValidationError):
        check_branch(branch)


@pytest.mark.parametrize(
    ("subdir", "clean"), [("/notebooks/", "notebooks"), ("a/b", "a/b"), ("", "")]
)
def test_a_folder_is_kept_relative(subdir, clean):
    assert check_subdir(subdir) == clean


@pytest.mark.parametrize("subdir", ["../x", "a/../../b", ".git", "a//b"])
def test_a_folder_outside_the_repository_is_refused(subdir):
    with pytest.raises(ValidationError):
        check_subdir(subdir)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"glpat-abcdefgh12345678\n", "token"),
        (b"deploy:gldt-abcdefgh1234", "token"),
        (KEY.encode(), "deploy-key"),
    ],
)
def test_a_token_or_a_deploy_key_is_recognised(data, kind):
    credential = parse_credential(data, "f")
    assert credential.kind == kind
    assert data.decode().strip() not in repr(credential)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty"),
        (b"two words here", "neither"),
        (b"short", "neither"),
        (KEY.replace("b3Bl", "Proc-Type: 4,ENCRYPTED\nb3Bl").encode(), "passphrase"),
        ("jeton-é-12345678".encode(), "not ASCII"),
    ],
)
def test_a_bad_credential_file_is_refused(data, reason):
    with pytest.raises(UsageError, match=reason):
        parse_credential(data, "f")


@pytest.mark.parametrize(
    ("kind", "url", "reason"),
    [
        ("token", "git@host:r.git", "https"),
        ("deploy-key", "https://host/r.git", "SSH URL"),
        ("token", "http://gitlab.example.org/r.git", "in clear"),
    ],
)
def test_a_credential_that_does_not_fit_the_url_is_refused(kind, url, reason):
    with pytest.raises(UsageError, match=reason):
        check_credential_fits(kind, url)


def test_git_gets_the_credential_by_path_and_nothing_of_the_services_environment(tmp_path):
    layout = MaterialLayout(tmp_path)
    environ = {
        "HOME": "/home/coursehub",
        "COURSEHUB_SECRET_KEY": "s3cret",
        "https_proxy": "http://p:3128",
    }
    env = plan_git_env(layout.home, plan_credential_env(layout, "c1", "token"), environ=environ)
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["COURSEHUB_GIT_CREDENTIAL"] == str(tmp_path / "private" / "credentials" / "c1")
    assert env["https_proxy"] == "http://p:3128"
    assert "s3cret" not in env.values() and env["HOME"] != "/home/coursehub"
    assert "file" not in env["GIT_ALLOW_PROTOCOL"].split(":")
    key_env = plan_credential_env(layout, "c1", "deploy-key")
    assert "-i " in key_env["GIT_SSH_COMMAND"] and "BatchMode=yes" in key_env["GIT_SSH_COMMAND"]


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("fatal: couldn't find remote ref refs/heads/dev", "branch dev does not exist in U"),
        ("fatal: Authentication failed for 'U'", "U refused the credential: check or renew"),
        ("fatal: could not read Username for 'U': terminal prompts disabled", "asks for a user"),
        ("git@h: Permission denied (publickey).", "refused the deploy key"),
        ("fatal: unable to access 'U': Could not resolve host: h", "U could not be fetched"),
        ("fatal: something new\n", "U could not be fetched"),
    ],
)
def test_git_failures_are_explained_in_one_line(stderr, expected):
    assert expected in explain_git_error(stderr, "U", "dev", "token")


@pytest.mark.parametrize(
    "stderr",
    [
        "fatal: unable to access 'U': Failed to connect to 127.0.0.1 port 9: Connection refused",
        "fatal: unable to access 'U': Couldn't connect to server",
        "fatal: repository 'http://127.0.0.1:18342/' not found",
        "fatal: 'x.git' does not appear to be a git repository",
        "fatal: unable to access 'U': The requested URL returned error: 502",
        "fatal: unable to access 'U': Operation timed out after 300000 milliseconds",
        "and the repository exists.",  # an ssh client talking to another service
        "kex_exchange_identification: Connection closed by remote host",
        "ssh: Could not resolve hostname h: Name or service not known",
        "fatal: protocol error: bad line length character: HTTP",
        "fatal: could not read Username for 'U': terminal prompts disabled",  # any 401
    ],
)
def test_a_failure_to_reach_a_repository_never_tells_one_service_from_another(stderr):
    assert explain_git_error(stderr, "U", "main", "") == UNREADABLE.format(url="U")


def test_a_missing_branch_is_named_only_for_a_repository_with_branches():
    stderr = "fatal: couldn't find remote ref refs/heads/main"
    assert "branch main does not exist" in explain_git_error(stderr, "U", "main", "", True)
    assert explain_git_error(stderr, "U", "main", "", False) == UNREADABLE.format(url="U")


GROUPS = [
    (
        "nbgrader-c1",
        {
            "material": {
                "repo": "file:///srv/m/published/c1.git",
                "branch": "main",
                "target": "c1-material",
            }
        },
    ),
    (
        "formgrade-c2",
        {
            "material": {
                "repo": "file:///srv/m/published/c2.git",
                "branch": "main",
                "target": "../x",
            }
        },
    ),
    ("nbgrader-c3", {"title": "no material"}),
    ("other", {"material": {"repo": "file:///x", "branch": "main", "target": "x"}}),
]


def test_a_server_reads_only_well_formed_material_of_its_course_groups():
    materials = parse_materials(GROUPS)
    assert list(materials) == ["c1"]
    assert choose_material(materials, "c3") == materials["c1"]  # the only one
    assert plan_material_env(materials) == {"GIT_CONFIG_SYSTEM": "/srv/m/published/gitconfig"}


def test_the_spawn_link_and_the_course_page_link_pull_the_same_thing():
    course = SimpleNamespace(
        course_id="c1", material=SimpleNamespace(pull_url="file:///srv/m/published/c1.git")
    )
    page = render_pull_link("/", course)  # type: ignore[arg-type]
    spawn = render_pull_path(parse_materials(GROUPS)["c1"])
    assert page is not None and page.startswith("/hub/user-redirect/git-pull?")
    assert parse_qs(urlsplit(page).query) == parse_qs(urlsplit(spawn).query)


def test_the_students_gitconfig_lists_each_published_repository(tmp_path):
    from coursehub.material.layout import render_gitconfig

    text = render_gitconfig([Path("/srv/m/published/b.git"), Path("/srv/m/published/a.git")])
    assert text.splitlines()[-2:] == [
        "\tdirectory = /srv/m/published/a.git",
        "\tdirectory = /srv/m/published/b.git",
    ]


def test_git_missing_or_a_missing_folder_is_one_line_naming_it(tmp_path):
    from coursehub.material.gitcmd import GitCommandError, run_git

    with pytest.raises(GitCommandError, match=r"git is not installed \(Debian package git\)"):
        run_git(["fetch", "origin"], {"PATH": str(tmp_path)})
    with pytest.raises(GitCommandError, match=f"folder {tmp_path / 'gone'} does not exist"):
        run_git(["status"], {"PATH": os.defpath}, cwd=tmp_path / "gone")
