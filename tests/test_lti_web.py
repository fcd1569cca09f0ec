"""The course app's LTI side: the launch API's guard, the pages where a lead links an LMS course."""

from __future__ import annotations

import time

import pytest

from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.lti.claims import MEMBERSHIP
from coursehub.catalog.models.lti import LtiLink
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    make_test_app,
    seed_web_catalog,
)

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
TOKEN = "launch-token"
AUTH = {"Authorization": f"token {TOKEN}"}
COURSE = "/courses/mlmeca-2025/lti"


@pytest.fixture
def web(database_url):
    seed_web_catalog(database_url)
    app = make_test_app(database_url, LTI_LAUNCH_TOKEN=TOKEN, WTF_CSRF_ENABLED=False)
    yield app.test_client()
    dispose_app(app)


INSTRUCTOR = f"{MEMBERSHIP}#Instructor"


def payload(
    username: str = "newbie", context_id: str = "moodle-5", role: str = f"{MEMBERSHIP}#Learner"
) -> dict:
    return {
        "issuer": "https://moodle.univ.example.fr",
        "username_claim": "custom_username",
        "hub_admins": ["root"],
        "claims": {
            "sub": f"sub-{username}",
            "nonce": f"n-{time.monotonic_ns()}",
            "exp": int(time.time()) + 300,
            LTI + "deployment_id": "3",
            LTI + "roles": [role],
            LTI + "context": {"id": context_id, "title": "Topologie (Moodle)"},
            LTI + "custom": {"username": username},
        },
    }


def as_(part: str) -> dict[str, str]:
    return identity_headers(IDENTITIES[part])


def test_the_launch_api_is_off_without_a_launch_token(app):
    answer = app.test_client().post("/api/v1/lti/launch", json=payload(), headers=AUTH)
    assert answer.status_code == 404
    assert "COURSEHUB_LTI_LAUNCH_TOKEN" in answer.get_json()["error"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "token wrong"}, as_("admin")])
def test_the_launch_api_answers_only_the_hub_token(web, headers):
    assert web.post("/api/v1/lti/launch", json=payload(), headers=headers).status_code == 401


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"not json", "JSON object"), (b'{"claims": 3}', "no claims object")],
)
def test_a_malformed_launch_request_is_refused(web, body, message):
    answer = web.post(
        "/api/v1/lti/launch", data=body, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert answer.status_code == 400
    assert message in answer.get_json()["error"]


def test_a_lead_links_a_pending_lms_course_after_seeing_its_title(web):
    first = web.post("/api/v1/lti/launch", json=payload("mbuffat", role=INSTRUCTOR), headers=AUTH)
    assert first.status_code == 403
    code = first.get_json()["code"]
    assert code in first.get_json()["error"]
    found = web.post(f"{COURSE}/link", data={"code": code.lower()}, headers=as_("lead"))
    assert found.status_code == 200
    assert "Topologie (Moodle)" in found.text and "Link it to MLMECA" in found.text
    assert "linking also confirms that this LMS account is you" in found.text
    done = web.post(f"{COURSE}/link", data={"code": code, "confirm": "1"}, headers=as_("lead"))
    assert done.status_code == 302
    page = web.get(COURSE, headers=as_("lead"))
    assert "Topologie (Moodle)" in page.text and "by mbuffat" in page.text
    second = web.post("/api/v1/lti/launch", json=payload(), headers=AUTH)
    assert second.status_code == 200
    assert second.get_json()["course_id"] == "mlmeca-2025"
    assert second.get_json()["role"] == "student"


@pytest.mark.parametrize("part", ["teacher", "grader", "student", "other_teacher"])
def test_only_the_lead_and_admins_reach_the_lms_links(web, part):
    assert web.get(COURSE, headers=as_(part)).status_code == 403
    assert web.post(f"{COURSE}/link", data={"code": "x"}, headers=as_(part)).status_code == 403


def test_an_admin_sees_every_pending_lms_course_and_a_lead_does_not(web):
    web.post("/api/v1/lti/launch", json=payload(context_id="moodle-77"), headers=AUTH)
    assert "Topologie (Moodle)" in web.get(COURSE, headers=as_("admin")).text
    assert "Topologie (Moodle)" not in web.get(COURSE, headers=as_("lead")).text


def test_a_wrong_code_says_what_to_check(web):
    answer = web.post(f"{COURSE}/link", data={"code": "ZZZZ-ZZZZ"}, headers=as_("lead"))
    assert answer.status_code == 404
    assert "no LMS course waits for a link with code" in answer.text


def test_unlinking_makes_the_lms_course_wait_again(web, database_url):
    first = web.post("/api/v1/lti/launch", json=payload("x", role=INSTRUCTOR), headers=AUTH)
    code = first.get_json()["code"]
    web.post(f"{COURSE}/link", data={"code": code, "confirm": "1"}, headers=as_("admin"))
    engine = make_engine(database_url)
    with session_scope(engine) as session:
        link_pk = session.query(LtiLink).one().id
    engine.dispose()
    gone = web.post(f"{COURSE}/{link_pk}/unlink", headers=as_("lead"))
    assert gone.status_code == 302
    again = web.post("/api/v1/lti/launch", json=payload(), headers=AUTH)
    assert again.status_code == 403 and "is not linked" in again.get_json()["error"]


def test_the_course_page_shows_lms_links_to_its_lead_only(web):
    assert COURSE in web.get("/courses/mlmeca-2025/", headers=as_("lead")).text
    assert COURSE not in web.get("/courses/mlmeca-2025/", headers=as_("teacher")).text


@pytest.mark.parametrize(
    "role", [f"{MEMBERSHIP}#Learner", f"{MEMBERSHIP}#TeachingAssistant"], ids=["learner", "ta"]
)
def test_only_an_instructors_launch_of_an_unlinked_lms_course_shows_the_link_code(web, role):
    answer = web.post("/api/v1/lti/launch", json=payload("ltilearner9", role=role), headers=AUTH)
    assert answer.status_code == 403
    body = answer.get_json()
    assert "code" not in body and "not linked to a course of the hub yet" in body["error"]
    assert "launching the hub once from this LMS course as Instructor" in body["error"]


def test_a_lead_of_another_course_cannot_link_with_an_instructors_code(web):
    first = web.post("/api/v1/lti/launch", json=payload("mbuffat", role=INSTRUCTOR), headers=AUTH)
    code = first.get_json()["code"]
    other = "/courses/other-2025/lti"
    for data in ({"code": code}, {"code": code, "confirm": "1"}):
        answer = web.post(f"{other}/link", data=data, headers=as_("other_teacher"))
        assert answer.status_code == 403
        assert "was shown to the LMS&#39;s Instructor mbuffat, not to you" in answer.text
    again = web.post("/api/v1/lti/launch", json=payload("p2509001"), headers=AUTH)
    assert "not linked" in again.get_json()["error"]


def test_a_launch_naming_an_existing_account_waits_for_the_leads_confirmation(web):
    first = web.post("/api/v1/lti/launch", json=payload("mbuffat", role=INSTRUCTOR), headers=AUTH)
    code = first.get_json()["code"]
    web.post(f"{COURSE}/link", data={"code": code, "confirm": "1"}, headers=as_("lead"))
    refused = web.post("/api/v1/lti/launch", json=payload("p2500003"), headers=AUTH)
    assert refused.status_code == 403
    assert "hub user p2500003 already exists and is not bound" in refused.get_json()["error"]
    page = web.get(COURSE, headers=as_("lead"))
    assert "Confirm: this is p2500003" in page.text
    request_pk = page.text.split("/lti/accounts/")[1].split("/")[0]
    done = web.post(f"{COURSE}/accounts/{request_pk}/confirm", headers=as_("lead"))
    assert done.status_code == 302
    again = web.post("/api/v1/lti/launch", json=payload("p2500003"), headers=AUTH)
    assert again.status_code == 200 and again.get_json()["name"] == "p2500003"


def test_a_launch_never_names_a_hub_admin(web):
    first = web.post("/api/v1/lti/launch", json=payload("mbuffat", role=INSTRUCTOR), headers=AUTH)
    web.post(
        f"{COURSE}/link",
        data={"code": first.get_json()["code"], "confirm": "1"},
        headers=as_("lead"),
    )
    body = payload("root")
    answer = web.post("/api/v1/lti/launch", json=body, headers=AUTH)
    assert answer.status_code == 403
    assert "hub user root is a hub admin" in answer.get_json()["error"]


def test_a_hub_admin_binds_a_refused_lms_account_from_the_command_line(web, database_url, capsys):
    from coursehub.cli import main

    first = web.post("/api/v1/lti/launch", json=payload("mbuffat", role=INSTRUCTOR), headers=AUTH)
    code = first.get_json()["code"]
    web.post(f"{COURSE}/link", data={"code": code, "confirm": "1"}, headers=as_("lead"))
    assert web.post("/api/v1/lti/launch", json=payload("tdupont"), headers=AUTH).status_code == 403
    capsys.readouterr()
    assert main(["lti", "requests", "--database-url", database_url]) == 0
    number, username = capsys.readouterr().out.split("\t")[:2]
    assert username == "tdupont"
    assert main(["lti", "bind", number, "--database-url", database_url]) == 0
    assert "bound to tdupont" in capsys.readouterr().out
    again = web.post("/api/v1/lti/launch", json=payload("tdupont"), headers=AUTH)
    assert again.status_code == 200 and again.get_json()["role"] == "teacher"
