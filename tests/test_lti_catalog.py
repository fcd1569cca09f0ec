"""LTI launches in the catalog: roles, usernames, deep links (pure), then enrolment and links."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from coursehub.catalog.admin import archive_course
from coursehub.catalog.errors import ConflictError, ForbiddenError, NotFoundError
from coursehub.catalog.lti.accounts import account_person, account_requests, bind_account
from coursehub.catalog.lti.claims import (
    MEMBERSHIP,
    LaunchError,
    LaunchRefusedError,
    claim_value,
    parse_launch,
    plan_notebook,
    plan_role,
)
from coursehub.catalog.lti.confirm import (
    check_link_by_lead,
    confirm_account_request,
    confirm_link_as_lead,
)
from coursehub.catalog.lti.identity import (
    BOUND,
    NEW,
    AccountCollisionError,
    AccountFacts,
    HubAccount,
    plan_account,
)
from coursehub.catalog.lti.launch import apply_launch, use_nonce
from coursehub.catalog.lti.links import (
    Context,
    confirm_link,
    get_pending,
    links_of,
    parse_code,
    pending_links,
    unlink,
)
from coursehub.catalog.members import add_member, get_membership
from coursehub.catalog.models.courses import Course, CourseMaterial, Person, Role
from coursehub.catalog.models.lti import LtiAccount
from coursehub.catalog.people import find_person
from coursehub.catalog.seed import seed_demo
from coursehub.web.api.lti import render_deep_link

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


def published(pull_url: str | None = "file:///srv/m/published/mlmeca-2025.git") -> Course:
    material = CourseMaterial(git_url="https://gitlab.example.org/meca/mlmeca.git")
    material.branch = "teacher-work"
    material.subpath = "notebooks"
    material.pull_url = pull_url
    return Course(course_id="mlmeca-2025", material=material)


def test_a_deep_link_pulls_the_published_folder_as_the_course_page_does():
    url = render_deep_link("/", published(), "week 1/TP.ipynb")
    assert url == (
        "/hub/user-redirect/git-pull?repo=file%3A%2F%2F%2Fsrv%2Fm%2Fpublished%2Fmlmeca-2025.git"
        "&branch=main&targetpath=mlmeca-2025-material"
        "&urlpath=lab%2Ftree%2Fmlmeca-2025-material%2Fweek%25201%2FTP.ipynb"
    )


def test_a_deep_link_before_the_material_is_published_is_refused():
    with pytest.raises(LaunchRefusedError, match="no published material yet"):
        render_deep_link("/", published(None), "week1/tp.ipynb")


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
        "hub_admins": extra.pop("hub_admins", ["root"]),
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
    confirm_link_as_lead(session, result.link, course, "mbuffat")
    session.commit()
    return course


def bind(session, username: str) -> None:
    """A hub admin's confirmation that LMS user ``sub-<username>`` is ``username``."""
    person = find_person(session, username)
    assert person is not None
    bind_account(session, ISSUER, f"sub-{username}", person)
    session.commit()


def n_people(session) -> int:
    return session.query(Person).count()


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
    bind(session, "gmartin")
    bind(session, "p2500001")
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
    bind(session, "p2500001")
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


def facts(**change: object) -> AccountFacts:
    values: dict = {
        "username": "victim",
        "bound_to": None,
        "person_exists": False,
        "person_bound_elsewhere": False,
        "hub_admin": False,
        "hub_user_exists": False,
    }
    return AccountFacts(**{**values, **change})


@pytest.mark.parametrize(
    "change",
    [
        {"person_exists": True},  # a catalog person (student, teacher, lead...) never bound
        {"hub_user_exists": True},  # a hub user outside the catalog
        {"person_exists": True, "hub_user_exists": None},  # the hub could not be asked
    ],
    ids=["catalog-person", "hub-user-outside-the-catalog", "hub-unknown"],
)
def test_an_existing_account_not_bound_to_the_lms_user_is_a_collision(change):
    with pytest.raises(AccountCollisionError, match="already exists and is not bound"):
        plan_account(facts(**change))


@pytest.mark.parametrize(
    "change",
    [{}, {"bound_to": "victim"}, {"person_exists": True, "bound_to": "victim"}],
    ids=["new", "bound", "bound-person"],
)
def test_a_hub_admin_is_never_reached_from_the_lms(change):
    with pytest.raises(LaunchRefusedError, match="is a hub admin"):
        plan_account(facts(hub_admin=True, **change))


def test_only_a_bound_account_or_a_new_name_is_signed_in():
    assert plan_account(facts(bound_to="victim", person_exists=True)) == BOUND
    assert plan_account(facts()) == NEW
    assert plan_account(facts(hub_user_exists=None)) == NEW


def test_a_launch_without_the_hubs_admin_list_is_a_malformed_request():
    payload = claims("x", [f"{MEMBERSHIP}#Learner"])
    del payload["hub_admins"]
    with pytest.raises(LaunchError, match="hub_admins"):
        parse_launch(payload)


@pytest.mark.parametrize(
    "username",
    ["mbuffat", "tdupont", "gmartin", "p2500001", "oteacher"],
    ids=["lead", "teacher", "grader", "student", "lead-of-another-course-without-email"],
)
def test_a_launch_naming_an_unbound_account_signs_nobody_in_and_changes_nobody(
    session, linked, username
):
    other = Course(
        course_id="other-2025", code="OTHER", title="Other", year=linked.year, portal=linked.portal
    )
    session.add(other)
    add_member(session, other, "oteacher", Role.LEAD)
    session.commit()
    person = find_person(session, username)
    before = (person.first_name, person.last_name, person.email, person.student_number)
    payload = claims(
        username, [f"{MEMBERSHIP}#Learner"], sub="lms-eve", email=f"{username}@attacker.example"
    )
    payload["claims"]["given_name"] = "Eve"
    try:
        message = launch(session, payload).refused
    except LaunchRefusedError as exc:  # mbuffat: bound to their own LMS account already
        message = str(exc)
    assert message is not None
    assert "already exists and is not bound" in message or "already signs in" in message
    session.refresh(person)
    assert (person.first_name, person.last_name, person.email, person.student_number) == before
    assert account_person(session, ISSUER, "lms-eve") is None
    assert get_membership(session, linked, username) is None or username != "oteacher"


def test_a_hub_user_outside_the_catalog_or_an_admin_is_never_created_from_a_launch(session, linked):
    before = n_people(session)
    payload = claims("hubadmin", [f"{MEMBERSHIP}#Learner"], hub_admins=["hubadmin"])
    with pytest.raises(LaunchRefusedError, match="is a hub admin"):
        apply_launch(session, parse_launch(payload))
    payload = claims("pamuser", [f"{MEMBERSHIP}#Learner"])
    result = apply_launch(session, parse_launch(payload), HubAccount(exists=True))
    assert result.refused is not None and "already exists" in result.refused
    payload = claims("hubadmin2", [f"{MEMBERSHIP}#Learner"])
    with pytest.raises(LaunchRefusedError, match="is a hub admin"):
        apply_launch(session, parse_launch(payload), HubAccount(exists=True, admin=True))
    assert n_people(session) == before
    assert session.query(LtiAccount).filter_by(subject="sub-pamuser").count() == 0


def test_the_lead_confirms_a_members_lms_account_and_its_next_launch_is_that_person(
    session, linked
):
    payload = claims("p2500002", [f"{MEMBERSHIP}#Learner"], sub="lms-bjorn")
    assert launch(session, payload).refused is not None
    (request,) = account_requests(session, linked)
    person = confirm_account_request(session, request, "mbuffat", admin=False, course=linked)
    session.commit()
    assert account_person(session, ISSUER, "lms-bjorn") is person
    result = launch(session, claims("p2500002", [f"{MEMBERSHIP}#Learner"], sub="lms-bjorn"))
    assert result.course_id == linked.course_id and result.role == Role.STUDENT
    assert account_requests(session) == []


def test_a_lead_never_confirms_an_lms_account_for_someone_teaching_elsewhere(session, linked):
    other = Course(
        course_id="other-2025", code="OTHER", title="Other", year=linked.year, portal=linked.portal
    )
    session.add(other)
    add_member(session, other, "oteacher", Role.LEAD)
    add_member(session, linked, "oteacher", Role.STUDENT)
    session.commit()
    launch(session, claims("oteacher", [f"{MEMBERSHIP}#Learner"], sub="lms-eve"))
    (request,) = account_requests(session, linked)
    with pytest.raises(ForbiddenError, match="teaches beyond mlmeca-2025"):
        confirm_account_request(session, request, "mbuffat", admin=False, course=linked)
    with pytest.raises(ForbiddenError, match="not launch from an LMS course linked"):
        confirm_account_request(session, request, "oteacher", admin=False, course=other)
    confirm_account_request(session, request, "root", admin=True, course=None)
    assert account_person(session, ISSUER, "lms-eve").username == "oteacher"


def test_only_an_instructors_launch_gets_a_link_code_of_its_own(session, course):
    learner = launch(session, claims("newbie", [f"{MEMBERSHIP}#Learner"], "ctx-9"))
    assert learner.link.instructor_subject is None
    with pytest.raises(ForbiddenError, match="no Instructor launched"):
        check_link_by_lead(session, learner.link, "mbuffat")
    first = launch(session, claims("mbuffat", [f"{MEMBERSHIP}#Instructor"], "ctx-9"))
    code = first.link.code
    assert (
        launch(session, claims("mbuffat", [f"{MEMBERSHIP}#Instructor"], "ctx-9")).link.code == code
    )
    other = launch(session, claims("tdupont", [f"{MEMBERSHIP}#Instructor"], "ctx-9"))
    assert other.link.code != code and other.link.instructor_username == "tdupont"


def test_only_the_instructor_whose_launch_showed_the_code_links_it_as_lead(session, course):
    result = launch(session, claims("someone", [f"{MEMBERSHIP}#Instructor"], "ctx-9"))
    with pytest.raises(ForbiddenError, match="shown to the LMS's Instructor someone, not to you"):
        confirm_link_as_lead(session, result.link, course, "mbuffat")
    result = launch(session, claims("mbuffat", [f"{MEMBERSHIP}#Instructor"], "ctx-9"))
    confirm_link_as_lead(session, result.link, course, "mbuffat")
    session.commit()
    assert account_person(session, ISSUER, "sub-mbuffat").username == "mbuffat"
    assert launch(session, claims("mbuffat", [f"{MEMBERSHIP}#Instructor"], "ctx-9")).role == (
        Role.LEAD
    )
