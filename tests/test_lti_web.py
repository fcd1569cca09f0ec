"""The course app's LTI side: the launch API's guard, the pages where a lead links an LMS course."""

from __future__ import annotations

import time

import pytest

from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.lti import LtiLink
from coursehub.catalog.ltilaunch import MEMBERSHIP
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


def payload(username: str = "newbie", context_id: str = "moodle-5") -> dict:
    return {
        "issuer": "https://moodle.univ.example.fr",
        "username_claim": "custom_username",
        "claims": {
            "sub": f"sub-{username}",
            "nonce": f"n-{time.monotonic_ns()}",
            "exp": int(time.time()) + 300,
            LTI + "deployment_id": "3",
            LTI + "roles": [f"{MEMBERSHIP}#Learner"],
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
    first = web.post("/api/v1/lti/launch", json=payload(), headers=AUTH)
    assert first.status_code == 403
    code = first.get_json()["code"]
    assert code in first.get_json()["error"]
    found = web.post(f"{COURSE}/link", data={"code": code.lower()}, headers=as_("lead"))
    assert found.status_code == 200
    assert "Topologie (Moodle)" in found.text and "Link it to MLMECA" in found.text
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
    code = web.post("/api/v1/lti/launch", json=payload(), headers=AUTH).get_json()["code"]
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
