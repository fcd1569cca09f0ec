"""LTI 1.3 launches end to end: a small LMS platform drives the real authenticator in a real hub.

The platform (:class:`lti_platform.Platform`) has its own RSA key pair and serves, on
127.0.0.1, its key set (JWKS) and the OIDC authorization endpoint, which
answers with the auto-submitted form carrying the signed ``id_token`` (IMS
Security Framework 1.0, section 5.1.1). The "browser" is a ``requests``
session: it posts the login initiation to the hub, follows the redirect to
the platform, and posts the platform's form to the hub's redirect URI, as a
browser would. The hub runs :class:`coursehub.spawn.lti.CoursehubLTIAuthenticator`,
which asks the course app (served on 127.0.0.1 on a SQLite catalog), which
enrols and syncs the course into the same hub.
"""

from __future__ import annotations

import html
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from sqlalchemy import func, select

from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.lti.accounts import account_requests
from coursehub.catalog.lti.confirm import confirm_account_request
from coursehub.catalog.lti.links import Context, confirm_link, find_link
from coursehub.catalog.material import record_success
from coursehub.catalog.models.courses import Membership, Person
from coursehub.catalog.models.lti import LtiLink
from coursehub.catalog.roster.apply import import_roster
from coursehub.hub.hubclient import HubClient
from coursehub.web.database import ENGINE_KEY
from coursehub.web.testing import live_server, make_test_app, seed_web_catalog
from helpers import free_port
from hubfixture import RunningHub, find_proxy
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    INSTITUTION_INSTRUCTOR,
    INSTRUCTOR,
    LEARNER,
    LINKED_CONTEXT,
    SYSTEM_ADMIN,
    TA,
    TA_SUBROLE,
    LaunchSpec,
    Platform,
)

pytestmark = pytest.mark.integration


@dataclass
class Setup:
    hub: RunningHub
    platform: Platform
    catalog_url: str
    course_id: str


@pytest.fixture(scope="module")
def lti(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Setup]:
    """A platform, a course app on a seeded catalog, and a hub with the LTI authenticator."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    workdir = tmp_path_factory.mktemp("lti")
    catalog = workdir / "catalog.sqlite"
    catalog.write_bytes(sqlite_template.read_bytes())
    url = f"sqlite:///{catalog}"
    course_id = seed_web_catalog(url)
    platform = Platform()
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(workdir / "hub", proxy, ports)
    hub.workdir.mkdir()
    launch_token = secrets.token_hex(16)
    app = make_test_app(
        url, HUB_SYNC_URL=hub.api_url, HUB_SYNC_TOKEN=hub.token, LTI_LAUNCH_TOKEN=launch_token
    )
    platforms = [
        {
            "issuer": platform.issuer,
            "client_ids": [CLIENT_ID],
            "deployment_ids": [DEPLOYMENT_ID],
            "authorize_url": platform.issuer + "/auth",
            "jwks_url": platform.issuer + "/jwks",
            "username_claim": "custom_username",
            "student_number_claim": "custom_student_number",
        }
    ]
    with live_server(app) as app_url:
        hub.extra_config = f"""
c.JupyterHub.authenticator_class = "coursehub.spawn.lti.CoursehubLTIAuthenticator"
c.CoursehubLTIAuthenticator.password_authenticator_class = "dummy"
c.CoursehubLTIAuthenticator.platforms = {platforms!r}
c.CoursehubLTIAuthenticator.launch_url = {app_url + "/api/v1/lti/launch"!r}
c.CoursehubLTIAuthenticator.launch_token = {launch_token!r}
c.Authenticator.allow_all = False
c.Authenticator.allow_existing_users = True
"""
        hub.start()
        try:
            yield Setup(hub, platform, url, course_id)
        finally:
            hub.stop()
            platform.close()
            app.extensions[ENGINE_KEY].dispose()


@dataclass
class Outcome:
    """The hub's answer to the launch form, and what a replay needs."""

    response: requests.Response
    cookies: requests.cookies.RequestsCookieJar
    form: dict[str, str]
    action: str


def launch(setup: Setup, spec: LaunchSpec, issuer: str | None = None) -> Outcome:
    """Run one launch as a browser: login initiation, platform form, form post to the hub."""
    browser = requests.Session()
    hint = secrets.token_hex(8)
    setup.platform.launches[hint] = spec
    start = browser.post(
        setup.hub.url + "/hub/lti13/oauth_login",
        data={
            "iss": issuer or setup.platform.issuer,
            "login_hint": spec.subject,
            "target_link_uri": setup.hub.url + "/hub/",
            "client_id": CLIENT_ID,
            "lti_deployment_id": DEPLOYMENT_ID,
            "lti_message_hint": hint,
        },
        allow_redirects=False,
        timeout=30,
    )
    if start.status_code != 302:
        return Outcome(start, browser.cookies, {}, "")
    page = browser.get(start.headers["Location"], timeout=30).text
    action = html.unescape(re.search(r'action="([^"]+)"', page).group(1))  # type: ignore[union-attr]
    form = {
        name: html.unescape(value)
        for name, value in re.findall(r'name="(\w+)" value="([^"]*)"', page)
    }
    cookies = browser.cookies.copy()
    response = browser.post(action, data=form, allow_redirects=False, timeout=60)
    return Outcome(response, cookies, form, action)


def hub_groups(setup: Setup, username: str) -> set[str]:
    with HubClient(setup.hub.api_url, setup.hub.admin_token) as client:
        model = client.find_user(username)
    return set(model["groups"]) if model else set()


def catalog_role(setup: Setup, username: str) -> str | None:
    engine = make_engine(setup.catalog_url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, setup.course_id)
            query = (
                select(Membership.role)
                .join(Membership.person)
                .where(Membership.course_pk == course.id, Person.username == username)
            )
            role = session.scalar(query)
            return None if role is None else str(role)
    finally:
        engine.dispose()


def n_people(setup: Setup) -> int:
    engine = make_engine(setup.catalog_url)
    try:
        with session_scope(engine) as session:
            return int(session.scalar(select(func.count()).select_from(Person)) or 0)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def linked(lti: Setup) -> Setup:
    """The LMS course LINKED_CONTEXT linked to the demo course (a first launch, then a lead)."""
    first = launch(lti, LaunchSpec("mbuffat", [INSTRUCTOR]))
    assert first.response.status_code == 403, first.response.text
    engine = make_engine(lti.catalog_url)
    try:
        with session_scope(engine) as session:
            link = find_link(session, Context(lti.platform.issuer, DEPLOYMENT_ID, LINKED_CONTEXT))
            assert link is not None and link.pending and link.code in first.response.text
            confirm_link(session, link, get_course(session, lti.course_id), "mbuffat")
    finally:
        engine.dispose()
    return lti


@pytest.mark.parametrize(
    ("roles", "role", "group"),
    [
        ([LEARNER], "student", "nbgrader-{}"),
        ([INSTRUCTOR, INSTITUTION_INSTRUCTOR], "teacher", "formgrade-{}"),
        ([TA], "grader", "formgrade-{}"),
        ([TA_SUBROLE], "grader", "formgrade-{}"),
        ([INSTITUTION_INSTRUCTOR, SYSTEM_ADMIN, LEARNER], "student", "nbgrader-{}"),
    ],
    ids=["learner", "instructor", "teaching-assistant", "ta-subrole", "institution-ignored"],
)
def test_a_launch_enrols_the_person_with_the_course_role_and_syncs_the_hub(
    linked, roles, role, group
):
    username = f"lti{secrets.token_hex(3)}"
    outcome = launch(linked, LaunchSpec(username, roles, email=f"{username}@univ.example.org"))
    assert outcome.response.status_code == 302, outcome.response.text
    assert catalog_role(linked, username) == role
    assert group.format(linked.course_id) in hub_groups(linked, username)
    assert "jupyterhub-hub-login" in outcome.response.cookies  # signed in


def test_a_launch_without_a_course_role_is_refused_and_changes_nothing(linked):
    before = n_people(linked)
    outcome = launch(linked, LaunchSpec("ltinorole", [INSTITUTION_INSTRUCTOR, SYSTEM_ADMIN]))
    assert outcome.response.status_code == 403
    assert "no role in this LMS course" in outcome.response.text
    assert n_people(linked) == before


@pytest.mark.parametrize(
    ("tamper", "status", "message"),
    [
        ({"audience": "another-tool"}, 401, "audience"),
        ({"lifetime_s": -60}, 400, "expired"),
        ({"foreign_key": True}, 400, "Signature verification failed"),
        ({"deployment_id": "99"}, 403, "deployment '99'"),
        ({"issuer": "http://127.0.0.1:9/other-lms"}, 400, "no LTI registration"),
    ],
    ids=["wrong-audience", "expired", "bad-signature", "unknown-deployment", "unknown-issuer"],
)
def test_a_forged_or_foreign_id_token_is_refused(linked, tamper, status, message):
    before = n_people(linked)
    outcome = launch(linked, LaunchSpec("ltiforged", [LEARNER], **tamper))
    assert outcome.response.status_code == status, outcome.response.text
    assert message.lower() in html.unescape(outcome.response.text).lower()
    assert n_people(linked) == before


def test_a_login_initiation_from_an_unknown_issuer_is_refused(linked):
    outcome = launch(linked, LaunchSpec("ltistranger", [LEARNER]), issuer="https://lms.evil")
    assert outcome.response.status_code == 400
    assert "no LTI registration for the platform" in outcome.response.text


def test_a_replayed_launch_is_refused_even_with_the_captured_cookies(linked):
    outcome = launch(linked, LaunchSpec("ltireplay", [LEARNER]))
    assert outcome.response.status_code == 302
    replay = requests.post(
        outcome.action,
        data=outcome.form,
        cookies=outcome.cookies,
        allow_redirects=False,
        timeout=30,
    )
    assert replay.status_code == 403
    assert "this launch was already used" in replay.text


def test_a_launch_whose_cookies_the_browser_kept_back_says_why(linked):
    """A cross-site POST without the state cookies (SameSite=Lax over plain HTTP)."""
    outcome = launch(linked, LaunchSpec("ltinocookie", [LEARNER]))
    assert outcome.response.status_code == 302  # the control: with the cookies
    second = launch(linked, LaunchSpec("ltinocookie2", [LEARNER]))
    refused = requests.post(second.action, data=second.form, allow_redirects=False, timeout=30)
    assert refused.status_code == 400
    assert "serve the hub over HTTPS" in refused.text


def test_an_unlinked_lms_course_says_whom_to_ask_and_enrols_nobody(linked):
    before = n_people(linked)
    spec = LaunchSpec("ltinewcomer", [LEARNER], context_id="moodle-99", context_title="Topology")
    outcome = launch(linked, spec)
    assert outcome.response.status_code == 403
    assert "is not linked to a course" in outcome.response.text
    assert "as Instructor" in outcome.response.text
    assert not re.search(r"[2-9A-Z]{4}-[2-9A-Z]{4}", outcome.response.text)  # no link code
    assert n_people(linked) == before
    assert hub_groups(linked, "ltinewcomer") == set()
    engine = make_engine(linked.catalog_url)
    try:
        with session_scope(engine) as session:
            link = session.scalar(select(LtiLink).where(LtiLink.context_id == "moodle-99"))
            assert link is not None and link.pending and link.context_title == "Topology"
    finally:
        engine.dispose()


def test_a_roster_student_and_the_same_student_from_the_lms_are_one_person_once_confirmed(linked):
    engine = make_engine(linked.catalog_url)
    try:
        with session_scope(engine) as session:
            header = "N° étudiant;Nom;Prénom;Courriel;Groupe\r\n"
            row = "p2600042;Lambert;Zoé;zoe.lambert@etu.example.org;G1\r\n"
            import_roster(session, linked.course_id, (header + row).encode("utf-8-sig"))
    finally:
        engine.dispose()
    before = n_people(linked)
    spec = LaunchSpec(
        " P2600042 ",
        [LEARNER],
        email="Zoe.Lambert@etu.example.org",
        student_number="p2600042",
    )
    outcome = launch(linked, spec)
    assert outcome.response.status_code == 403
    assert "hub user p2600042 already exists and is not bound" in outcome.response.text
    assert "jupyterhub-hub-login" not in outcome.response.cookies
    engine = make_engine(linked.catalog_url)
    try:
        with session_scope(engine) as session:
            course = get_course(session, linked.course_id)
            (request,) = [r for r in account_requests(session, course) if r.username == "p2600042"]
            confirm_account_request(session, request, "mbuffat", admin=False, course=course)
    finally:
        engine.dispose()
    outcome = launch(linked, spec)
    assert outcome.response.status_code == 302, outcome.response.text
    assert n_people(linked) == before
    assert catalog_role(linked, "p2600042") == "student"
    assert f"nbgrader-{linked.course_id}" in hub_groups(linked, "p2600042")


def test_a_launch_colliding_with_another_person_is_refused_not_merged(linked):
    spec = LaunchSpec("p2500002", [LEARNER], email="someone.else@univ.example.org")
    outcome = launch(linked, spec)
    assert outcome.response.status_code == 403
    assert "hub user p2500002 already exists and is not bound" in outcome.response.text
    first = launch(linked, LaunchSpec("ltitwin", [LEARNER], subject="lms-user-a"))
    assert first.response.status_code == 302
    second = launch(linked, LaunchSpec("ltitwin", [LEARNER], subject="lms-user-b"))
    assert second.response.status_code == 403
    assert "another LMS account already signs in as ltitwin" in second.response.text


def test_a_deep_link_pulls_the_published_material_as_the_course_page_does(linked):
    pull_url = "file:///srv/coursehub/material/published/mlmeca-2025.git"
    engine = make_engine(linked.catalog_url)
    try:
        with session_scope(engine) as session:
            material = get_course(session, linked.course_id).material
            assert material is not None
            record_success(material, "0" * 40, pull_url)
    finally:
        engine.dispose()
    spec = LaunchSpec("ltideep", [LEARNER], notebook="week1/pendulum.ipynb")
    outcome = launch(linked, spec)
    assert outcome.response.status_code == 302, outcome.response.text
    location = urlsplit(outcome.response.headers["Location"])
    query = {k: v[0] for k, v in parse_qs(location.query).items()}
    assert location.path == "/hub/user-redirect/git-pull"
    assert query == {
        "repo": pull_url,
        "branch": "main",
        "targetpath": f"{linked.course_id}-material",
        "urlpath": f"lab/tree/{linked.course_id}-material/week1/pendulum.ipynb",
    }


def test_a_deep_link_outside_the_material_is_refused(linked):
    outcome = launch(linked, LaunchSpec("ltideep2", [LEARNER], notebook="../../etc/passwd"))
    assert outcome.response.status_code == 403
    assert "not a notebook path" in outcome.response.text


@pytest.mark.parametrize("roles", [[LEARNER], [INSTRUCTOR]], ids=["learner", "instructor"])
def test_a_launch_never_signs_in_as_a_hub_admin(linked, roles):
    spec = LaunchSpec("hubadmin", roles, email="hubadmin@attacker.example")
    outcome = launch(linked, spec)
    assert outcome.response.status_code == 403
    assert "hub user hubadmin is a hub admin" in html.unescape(outcome.response.text)
    assert "jupyterhub-hub-login" not in outcome.response.cookies
    assert catalog_role(linked, "hubadmin") is None
