"""LTI launches in the catalog: roles, usernames, deep links (pure), then enrolment and links."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from coursehub.catalog.admin import archive_course
from coursehub.catalog.errors import ConflictError, NotFoundError
from coursehub.catalog.lti import (
    Context,
    confirm_link,
    get_pending,
    links_of,
    parse_code,
    pending_links,
    unlink,
    use_nonce,
)
from coursehub.catalog.ltilaunch import (
    MEMBERSHIP,
    LaunchRefusedError,
    apply_launch,
    claim_value,
    parse_launch,
    plan_notebook,
    plan_role,
)
from coursehub.catalog.models import CourseMaterial, Role
from coursehub.catalog.people import get_membership
from coursehub.catalog.seed import seed_demo
from coursehub.web.ltiapi import render_pull_url

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
ISSUER = "https://moodle.univ.example.fr"
INSTITUTION = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#"
SYSTEM = "http://purl.imsglobal.org/vocab/lis/v2/system/person#"


@pytest.mark.parametrize(
    ("roles", "role"),
    [
        ([f"{MEMBERSHIP}#Learner"], Role.STUDENT),
        ([f"{MEMBERSHIP}#Instructor"], Role.TEACHER),
        ([f"{MEMBERSHIP}#TeachingAssistant"], Role.GRADER),
        ([f"{MEMBERSHIP}/Instructor#TeachingAssistant"], Role.GRADER),
        ([f"{MEMBERSHIP}#Learner", f"{MEMBERSHIP}#Instructor"], Role.TEACHER),
        ([f"{INSTITUTION}Instructor", f"{MEMBERSHIP}#Learner"], Role.STUDENT),
        ([f"{INSTITUTION}Instructor", f"{SYSTEM}Administrator"], None),
        (["Instructor", "Learner"], None),
        ([f"{MEMBERSHIP}#Mentor"], None),
        ([], None),
    ],
)
def test_only_course_membership_roles_give_a_role(roles, role):
    assert plan_role(roles) == role


@pytest.mark.parametrize(
    ("name", "claims", "value"),
    [
        ("email_local_part", {"email": "Zoe.Lambert@etu.example.org"}, "Zoe.Lambert"),
        ("custom_student_number", {LTI + "custom": {"student_number": "p2600042"}}, "p2600042"),
        ("custom_student_number", {LTI + "custom": "not-a-dict"}, ""),
        ("preferred_username", {"preferred_username": "zlambert"}, "zlambert"),
        ("email", {}, ""),
    ],
)
def test_a_claim_is_read_from_its_configured_place(name, claims, value):
    assert claim_value(claims, name) == value


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (None, None),
        ("", None),
        ("week1/pendulum.ipynb", "week1/pendulum.ipynb"),
        ("/week 1/TP pendule.ipynb/", "week 1/TP pendule.ipynb"),
    ],
)
def test_a_deep_link_names_a_notebook_of_the_material(value, path):
    assert plan_notebook(value) == path


@pytest.mark.parametrize(
    "value",
    [
        "../secret.ipynb",
        "a/./b.ipynb",
        "a//b.ipynb",
        "notes.txt",
        "a\\b.ipynb",
        "é.ipynb",
        "%2e.ipynb",
    ],
)
def test_a_deep_link_outside_plain_notebook_paths_is_refused(value):
    with pytest.raises(LaunchRefusedError, match="not a notebook path"):
        plan_notebook(value)


def test_the_pull_url_is_a_hub_path_with_every_part_encoded():
    material = CourseMaterial(git_url="https://git.example.org/a b.git?x=1&y", branch="main")
    material.subpath = "notebooks"
    url = render_pull_url("/hub/", "mlmeca-2025", material, "week 1/TP.ipynb")
    assert url == (
        "/hub/user-redirect/git-pull?repo=https%3A%2F%2Fgit.example.org%2Fa+b.git%3Fx%3D1%26y"
        "&branch=main&targetpath=mlmeca-2025"
        "&urlpath=lab%2Ftree%2Fmlmeca-2025%2Fnotebooks%2Fweek%25201%2FTP.ipynb"
    )


@pytest.mark.parametrize(
    ("typed", "code"),
    [(" k7qx3mzp ", "K7QX-3MZP"), ("K7QX-3MZP", "K7QX-3MZP"), ("K7QX-3MZ", ""), ("K7QX-3MZ0", "")],
)
def test_a_link_code_is_read_as_typed(typed, code):
    assert parse_code(typed) == code


def claims(username: str, roles: list[str], context_id: str = "ctx-1", **extra: object) -> dict:
    return {
        "issuer": ISSUER,
        "username_claim": "custom_username",
        "student_number_claim": "custom_student_number",
        "claims": {
            "sub": extra.pop("sub", f"sub-{username}"),
            "nonce": extra.pop("nonce", f"nonce-{time.monotonic_ns()}"),
            "exp": int(time.time()) + 300,
            "email": extra.pop("email", None),
            LTI + "deployment_id": "3",
            LTI + "roles": roles,
            LTI + "context": {"id": context_id, "title": "ML (Moodle)"},
            LTI + "custom": {"username": username, **extra},
        },
    }


def launch(session, payload):
    parsed = parse_launch(payload)
    result = apply_launch(session, parsed)
    session.commit()
    return result


@pytest.fixture
def course(session):
    course = seed_demo(session)
    session.commit()
    return course


@pytest.fixture
def linked(session, course):
    result = launch(session, claims("mbuffat", [f"{MEMBERSHIP}#Instructor"]))
    confirm_link(session, result.link, course, "mbuffat")
    session.commit()
    return course


def test_a_launch_from_an_unlinked_context_records_it_pending_and_enrols_nobody(session, course):
    result = launch(session, claims("newbie", [f"{MEMBERSHIP}#Learner"], "ctx-9"))
    assert result.course_id is None and result.link.pending
    assert get_membership(session, course, "newbie") is None
    assert [link.context_id for link in pending_links(session)] == ["ctx-9"]
    again = launch(session, claims("other", [f"{MEMBERSHIP}#Learner"], "ctx-9"))
    assert again.link.code == result.link.code


def test_a_lead_confirms_a_link_once_and_can_remove_it(session, course, linked):
    link = links_of(session, course)[0]
    with pytest.raises(NotFoundError, match="no LMS course waits"):
        get_pending(session, link.code)
    with pytest.raises(ConflictError, match="already linked to mlmeca-2025"):
        confirm_link(session, link, course, "root")
    unlink(session, course, link.id)
    assert links_of(session, course) == []


def test_a_launch_never_lowers_a_role(session, linked):
    result = launch(session, claims("mbuffat", [f"{MEMBERSHIP}#Instructor"]))
    assert result.role == Role.LEAD
    result = launch(session, claims("gmartin", [f"{MEMBERSHIP}#Learner"]))
    assert result.role == Role.GRADER
    result = launch(session, claims("p2500001", [f"{MEMBERSHIP}#TeachingAssistant"]))
    assert result.role == Role.GRADER


def test_a_launch_fills_missing_identity_and_never_overwrites_it(session, linked):
    launch(session, claims("newbie", [f"{MEMBERSHIP}#Learner"], email="newbie@univ.example.org"))
    membership = get_membership(session, linked, "newbie")
    assert membership.person.email == "newbie@univ.example.org"
    result = launch(
        session,
        claims("p2500001", [f"{MEMBERSHIP}#Learner"], email="ANAïs.lefèvre@etu.example.org"),
    )
    assert result.role == Role.STUDENT
    assert get_membership(session, linked, "p2500001").person.email == (
        "anaïs.lefèvre@etu.example.org"
    )


def test_a_student_number_of_someone_else_is_refused(session, linked):
    payload = claims("newbie", [f"{MEMBERSHIP}#Learner"], student_number="p2500002")
    with pytest.raises(LaunchRefusedError, match="belongs to hub user p2500002"):
        launch(session, payload)


def test_an_lms_account_that_changes_username_is_refused(session, linked):
    launch(session, claims("first", [f"{MEMBERSHIP}#Learner"], sub="lms-7"))
    with pytest.raises(LaunchRefusedError, match="your LMS account is hub user first"):
        launch(session, claims("second", [f"{MEMBERSHIP}#Learner"], sub="lms-7"))


def test_a_launch_into_an_archived_course_is_refused(session, linked):
    archive_course(session, linked)
    session.commit()
    with pytest.raises(LaunchRefusedError, match="archived"):
        launch(session, claims("newbie", [f"{MEMBERSHIP}#Learner"]))


def test_a_nonce_is_used_once_until_its_token_expires(session):
    now = datetime.now(UTC)
    assert use_nonce(session, ISSUER, "n-1", now + timedelta(minutes=5), now)
    assert not use_nonce(session, ISSUER, "n-1", now + timedelta(minutes=5), now)
    assert use_nonce(session, "https://other", "n-1", now + timedelta(minutes=5), now)
    later = now + timedelta(minutes=6)
    assert use_nonce(session, ISSUER, "n-1", later + timedelta(minutes=5), later)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sub": ""}, "anonymously"),
        ({"username": ""}, "the LMS sent no custom username"),
        ({"username": "bad name!"}, "cannot be a hub account"),
    ],
)
def test_a_launch_without_a_usable_person_is_refused(change, message):
    payload = claims("x", [f"{MEMBERSHIP}#Learner"])
    if "sub" in change:
        payload["claims"]["sub"] = change["sub"]
    else:
        payload["claims"][LTI + "custom"]["username"] = change["username"]
    with pytest.raises(LaunchRefusedError, match=message):
        parse_launch(payload)


def test_a_context_is_keyed_by_issuer_deployment_and_context_id():
    assert Context(ISSUER, "3", "c") != Context(ISSUER, "4", "c")
