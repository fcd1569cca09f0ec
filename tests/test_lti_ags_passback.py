"""Grade passback end to end: launches record the grade service, scores reach a real-HTTP LMS.

The course app is served on 127.0.0.1 (its key set included); the LMS side
is :class:`lti_platform.AgsPlatform` (token endpoint verifying the tool's
client assertion against that key set, line items, scores). Launches go
through the course app's real ``POST /api/v1/lti/launch`` with the claims
the hub forwards (the hub's own checks are tests/test_lti_launch.py's).
Grades are made with nbgrader's ``Gradebook`` API, as in
tests/test_export_grades.py: ps1 out of 4, p2500001 graded 4, p2500002
graded 3 less a late penalty of 1, p2500003 submitted nothing, p2500004
graded 1 but never launched from the LMS.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import requests
from jwt.algorithms import RSAAlgorithm
from sqlalchemy import select

from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.lti.accounts import bind_account
from coursehub.catalog.lti.claims import MEMBERSHIP
from coursehub.catalog.lti.links import Context, confirm_link, record_pending
from coursehub.catalog.models.courses import Course
from coursehub.catalog.models.lti import LtiGradeService
from coursehub.catalog.people import get_person
from coursehub.cli import main
from coursehub.grading.layout import ensure_course, make_layout
from coursehub.lti.keys import generate_key, load_private_key
from coursehub.web.testing import (
    IDENTITIES,
    dispose_app,
    identity_headers,
    live_server,
    make_test_app,
    seed_web_catalog,
)
from lti_platform import AGS_CLAIM, CLIENT_ID, AgsPlatform

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
COURSE = "mlmeca-2025"
CONTEXT = "moodle-42"
TOKEN = "launch-token"
LAUNCHED = ("p2500001", "p2500002", "p2500003")


@dataclass
class Setup:
    url: str
    platform: AgsPlatform
    client: object
    app_url: str
    key: Path


def launch(client, platform: AgsPlatform, username: str, context: str = CONTEXT, ags=True):
    claims = {
        "iss": platform.issuer,
        "aud": CLIENT_ID,
        "sub": f"lms-{username}",
        "nonce": f"n-{time.monotonic_ns()}",
        "exp": int(time.time()) + 300,
        LTI + "deployment_id": "3",
        LTI + "roles": [f"{MEMBERSHIP}#Learner"],
        LTI + "context": {"id": context, "title": "Mécanique (Moodle)"},
        LTI + "custom": {"username": username},
    }
    if ags:
        claims[AGS_CLAIM] = platform.ags_claim()
    payload = {
        "issuer": platform.issuer,
        "username_claim": "custom_username",
        "token_url": platform.token_url,
        "hub_admins": [],
        "claims": claims,
    }
    return client.post(
        "/api/v1/lti/launch", json=payload, headers={"Authorization": f"token {TOKEN}"}
    )


def link_context(url: str, issuer: str, context: str, code: str = "MLMECA") -> str:
    """Link the LMS ``context`` to the course whose code is ``code``; return its course_id."""
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            course = session.scalar(select(Course).where(Course.code == code))
            assert course is not None
            link = record_pending(session, Context(issuer, "3", context, "Mécanique"), "mbuffat")
            confirm_link(session, link, course, "mbuffat")
            for username in (*LAUNCHED, "oteacher"):  # a hub admin confirmed their LMS accounts
                bind_account(session, issuer, f"lms-{username}", get_person(session, username))
            return course.course_id
    finally:
        engine.dispose()


def make_grades(root: Path) -> None:
    from nbgrader.api import Gradebook

    layout = make_layout(COURSE, root / "courses", root / "exchange", single_user=True)
    ensure_course(layout)
    with Gradebook(layout.db_url, course_id=COURSE) as gradebook:
        gradebook.add_assignment("ps1", duedate=datetime(2025, 3, 1, 17, 0))
        gradebook.add_notebook("energy", "ps1")
        gradebook.add_grade_cell("energy_test", "energy", "ps1", max_score=4, cell_type="code")
        for student_id in (*LAUNCHED, "p2500004"):
            gradebook.add_student(student_id, first_name=student_id, last_name="Test")
        for student_id, score, penalty in (
            ("p2500001", 4.0, None),
            ("p2500002", 3.0, 1.0),
            ("p2500004", 1.0, None),
        ):
            with gradebook.db.no_autoflush:  # nbgrader builds the rows one by one (SAWarning)
                submission = gradebook.add_submission("ps1", student_id)
            notebook = submission.notebooks[0]
            notebook.grades[0].auto_score = score
            notebook.late_submission_penalty = penalty
            gradebook.db.commit()


@pytest.fixture
def ags(database_url, tmp_path, monkeypatch) -> Iterator[Setup]:
    seed_web_catalog(database_url)
    make_grades(tmp_path)
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    key = generate_key(tmp_path / "lti" / "tool-key.pem")
    platform = AgsPlatform()
    link_context(database_url, platform.issuer, CONTEXT)
    app = make_test_app(
        database_url, LTI_LAUNCH_TOKEN=TOKEN, LTI_TOOL_KEY=str(key), WTF_CSRF_ENABLED=False
    )
    try:
        with live_server(app) as app_url:
            platform.tool_jwks_url = app_url + "/api/v1/lti/jwks.json"
            client = app.test_client()
            for username in LAUNCHED:
                answer = launch(client, platform, username)
                assert answer.status_code == 200, answer.get_json()
            yield Setup(database_url, platform, client, app_url, key)
    finally:
        platform.close()
        dispose_app(app)


def sent_scores(platform: AgsPlatform) -> dict[str, tuple[float, float]]:
    return {b["userId"]: (b["scoreGiven"], b["scoreMaximum"]) for _n, b in platform.scores}


def test_a_launch_records_the_grade_service_of_its_lms_link(ags):
    engine = make_engine(ags.url)
    try:
        with session_scope(engine) as session:
            service = session.scalar(select(LtiGradeService))
            assert service is not None
            assert service.link.context_id == CONTEXT
            assert service.lineitems_url == ags.platform.lineitems_url
            assert service.token_url == ags.platform.token_url
            assert service.client_id == CLIENT_ID
            assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in service.scopes
    finally:
        engine.dispose()


def test_a_teacher_sends_the_graded_scores_and_sees_each_student(ags):
    page = ags.client.post(
        f"/courses/{COURSE}/grading/lms-grades",
        data={"assignment": "ps1"},
        headers=identity_headers(IDENTITIES["teacher"]),
    )
    text = page.get_data(as_text=True)
    assert page.status_code == 200, text
    assert sent_scores(ags.platform) == {
        "lms-p2500001": (4.0, 4.0),
        "lms-p2500002": (2.0, 4.0),
    }
    assert [(i["label"], i["resourceId"], i["scoreMaximum"]) for i in ags.platform.line_items] == [
        ("ps1", "ps1", 4.0)
    ]
    body = ags.platform.scores[0][1]
    assert (body["activityProgress"], body["gradingProgress"]) == ("Completed", "FullyGraded")
    claims = ags.platform.token_requests[0]["claims"]
    assert claims["iss"] == claims["sub"] == CLIENT_ID
    assert "2 sent, 2 skipped, 0 failed" in text
    assert 'data-student="p2500003" data-outcome="skipped"' in text
    assert "not submitted" in text
    assert 'data-student="p2500004" data-outcome="skipped"' in text
    assert "never launched the hub from the LMS" in text


def test_a_grader_cannot_send_grades_to_the_lms(ags):
    page = ags.client.post(
        f"/courses/{COURSE}/grading/lms-grades",
        data={"assignment": "ps1"},
        headers=identity_headers(IDENTITIES["grader"]),
    )
    assert page.status_code == 403
    assert ags.platform.scores == []


def test_the_grading_page_offers_the_button_to_teachers(ags):
    page = ags.client.get(
        f"/courses/{COURSE}/grading", headers=identity_headers(IDENTITIES["teacher"])
    )
    assert "Send grades to the LMS" in page.get_data(as_text=True)
    page = ags.client.get(
        f"/courses/{COURSE}/grading", headers=identity_headers(IDENTITIES["grader"])
    )
    assert "Send grades to the LMS" not in page.get_data(as_text=True)


def test_a_second_passback_finds_the_line_item_and_zero_missing_sends_0(ags, capsys):
    args = ["lti", "passback", COURSE, "ps1", "--database-url", ags.url, "--key", str(ags.key)]
    assert main(args) == 0
    assert main([*args, "--zero-missing"]) == 0
    out = capsys.readouterr().out
    assert len(ags.platform.line_items) == 1
    assert "line item 'ps1' found" in out
    assert "p2500003: sent 0" in out
    assert "p2500004: skipped 1: never launched" in out
    assert [b["userId"] for _n, b in ags.platform.scores].count("lms-p2500003") == 1


def test_a_refused_token_names_the_platform_and_sends_nothing(ags, capsys):
    ags.platform.refuse_tokens = True
    args = ["lti", "passback", COURSE, "ps1", "--database-url", ags.url, "--key", str(ags.key)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"the LMS platform {ags.platform.issuer} refused the tool an access token" in err
    assert "invalid_client" in err
    assert ags.platform.line_items == [] and ags.platform.scores == []


def test_a_token_request_signed_by_another_key_is_refused(ags, tmp_path, capsys):
    other = generate_key(tmp_path / "other.pem")
    args = ["lti", "passback", COURSE, "ps1", "--database-url", ags.url, "--key", str(other)]
    assert main(args) == 2
    assert "refused the tool an access token" in capsys.readouterr().err
    assert ags.platform.scores == []


def test_a_score_the_platform_refuses_is_reported_failed_and_the_others_are_sent(ags, capsys):
    ags.platform.refuse_users = {"lms-p2500002"}
    args = ["lti", "passback", COURSE, "ps1", "--database-url", ags.url, "--key", str(ags.key)]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "1 sent, 2 skipped, 1 failed" in out
    assert "p2500002: failed 2: refused by the platform (HTTP 400" in out
    assert sent_scores(ags.platform) == {"lms-p2500001": (4.0, 4.0)}


def test_a_course_whose_launches_carry_no_grade_service_says_what_to_allow(ags, capsys):
    other = link_context(ags.url, ags.platform.issuer, "moodle-7", "OTHER")
    answer = launch(ags.client, ags.platform, "oteacher", context="moodle-7", ags=False)
    assert answer.status_code == 200, answer.get_json()
    assert main(["lti", "passback", other, "ps1", "--database-url", ags.url]) == 2
    err = capsys.readouterr().err
    assert f"no LMS link of {other} has grade services" in err
    assert "Assignment and Grade Services" in err


def test_the_key_set_serves_the_public_key_only_to_anyone(ags):
    answer = requests.get(ags.app_url + "/api/v1/lti/jwks.json", timeout=10)
    assert answer.status_code == 200
    (jwk,) = answer.json()["keys"]
    assert set(jwk) == {"kty", "n", "e", "kid", "alg", "use"}
    public = load_private_key(ags.key).public_key().public_numbers()
    assert RSAAlgorithm.from_jwk(jwk).public_numbers() == public
