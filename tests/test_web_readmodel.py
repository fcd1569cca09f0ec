"""One read model for every course page and the API; typed enums; write-only collections;
the one commit step of the views. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, select, text

from coursehub.catalog import courses, readmodel
from coursehub.catalog import members as catalog_members
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.errors import ConflictError
from coursehub.catalog.models.courses import (
    Course,
    CourseGroup,
    GroupKind,
    Membership,
    Person,
    Role,
)
from coursehub.web.database import get_session
from coursehub.web.identity import Identity
from coursehub.web.saving import commit_or_show, committing
from coursehub.web.testing import add_students, api_headers, identity_headers
from helpers import counted_statements

C = "mlmeca-2025"
LEAD = identity_headers(Identity("mbuffat"))

#: Every GET about one course, page or API, with who asks and its query budget.
#: The lead's course page has one more: the years a "Copy to next year" may go to.
COURSE_READS = [
    (f"/courses/{C}/", LEAD, 7),
    (f"/courses/{C}/groups", LEAD, 4),
    (f"/courses/{C}/members", LEAD, 4),
    (f"/api/v1/courses/{C}", api_headers("lead"), 6),
    (f"/api/v1/courses/{C}", api_headers("student"), 5),
    (f"/api/v1/courses/{C}/members", api_headers("grader"), 4),
]


def statements_of(app, path: str, headers: dict[str, str]) -> int:
    client = app.test_client()
    assert client.get(path, headers=headers).status_code == 200  # warms the caches
    with counted_statements(app) as statements:
        assert client.get(path, headers=headers).status_code == 200
    return len(statements)


def enrol(url: str, n_students: int) -> None:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            add_students(session, readmodel.load_course(session, C), n_students)
    finally:
        engine.dispose()


@pytest.mark.parametrize(("path", "headers", "budget"), COURSE_READS)
def test_course_pages_and_api_run_the_same_few_queries_whatever_the_roster(
    app, database_url, path, headers, budget
):
    small = statements_of(app, path, headers)
    enrol(database_url, 150)
    assert statements_of(app, path, headers) == small <= budget


def test_the_api_shows_the_course_as_the_read_model_reads_it(app, database_url):
    enrol(database_url, 3)
    body = app.test_client().get(f"/api/v1/courses/{C}", headers=api_headers("grader")).get_json()
    engine = make_engine(database_url)
    with session_scope(engine) as session:
        course = readmodel.load_course(session, C)
        groups = readmodel.load_groups(session, course)
        team = readmodel.load_team(session, course, groups.names)
        students = readmodel.load_students(session, course, groups.names)
    engine.dispose()
    assert [(m["username"], m["role"]) for m in body["team"]] == [
        (m.username, m.role.value) for m in team
    ]
    assert [m["username"] for m in body["students"]] == [m.username for m in students]
    assert [(g["name"], g["kind"], g["n_students"]) for g in body["groups"]] == [
        (g.name, g.kind.value, g.n_students) for g in groups.rows
    ]
    assert {m["group"] for m in body["students"]} >= {"B1", "B2", "B3"}


def test_the_api_members_list_every_member_by_username_with_group_or_none(app):
    client = app.test_client()
    members = client.get(f"/api/v1/courses/{C}/members", headers=api_headers("lead")).get_json()
    usernames = [m["username"] for m in members["members"]]
    assert usernames == sorted(usernames) and {"mbuffat", "p2500001"} <= set(usernames)
    lead = next(m for m in members["members"] if m["username"] == "mbuffat")
    assert lead["role"] == "lead" and lead["group"] is None


def test_the_team_page_lists_the_team_lead_first_and_no_student(client):
    body = client.get(f"/courses/{C}/members", headers=LEAD).get_data(as_text=True)
    order = [body.index(name) for name in ("mbuffat", "tdupont", "gmartin")]
    assert order == sorted(order) and "p2500001" not in body


def test_roles_and_kinds_are_enums_stored_as_the_same_strings(session):
    from coursehub.catalog.seed import seed_demo

    course = seed_demo(session)
    courses.add_group(session, course, "TP1", "TP")
    session.commit()
    session.expunge_all()
    roles = [m.role for m in session.scalars(select(Membership))]
    assert all(type(role) is Role for role in roles) and set(roles) == set(Role)
    assert all(type(g.kind) is GroupKind for g in session.scalars(select(CourseGroup)))
    stored_roles = set(session.scalars(text("SELECT role FROM memberships")))
    stored_kinds = set(session.scalars(text("SELECT kind FROM course_groups")))
    assert stored_roles == {"lead", "teacher", "grader", "student"}
    assert stored_kinds == {"TD", "TP"}


@pytest.mark.parametrize(
    "collection", [Course.memberships, Person.memberships, CourseGroup.memberships]
)
def test_large_collections_are_write_only(collection):
    assert inspect(collection).property.lazy == "write_only"


def test_removals_work_where_jupyterhub_watches_every_session(session):
    """JupyterHub's ORM walks the relationships of every deleted object, in any Session."""
    pytest.importorskip("jupyterhub.orm")
    from coursehub.catalog.seed import seed_demo

    course = seed_demo(session)
    session.commit()
    courses.remove_group(session, course, "G1")
    catalog_members.add_member(session, course, "tdupont", Role.LEAD)
    catalog_members.remove_member(session, course, "mbuffat")
    session.commit()
    names = readmodel.load_groups(session, course).names
    assert sorted(names.values()) == ["G2"]
    members = readmodel.load_members(session, course, names)
    assert "mbuffat" not in {m.username for m in members}
    assert {m.group_name for m in members if m.role == Role.STUDENT} == {"", "G2"}


def test_a_refused_change_is_rolled_back_and_shown(app):
    with app.test_request_context():
        from flask import get_flashed_messages

        session = get_session()
        course = readmodel.load_course(session, C)
        with commit_or_show(session) as saved:
            courses.add_group(session, course, "G9")
            courses.add_group(session, course, "G1")  # exists: ConflictError
            pytest.fail("the block goes on after a refusal")
        assert not saved and isinstance(saved.error, ConflictError)
        assert get_flashed_messages() == ["course mlmeca-2025 already has a group G1"]
        assert "G9" not in readmodel.load_groups(session, course).names.values()
        with commit_or_show(session) as saved:
            courses.add_group(session, course, "G9")
        assert saved and "G9" in readmodel.load_groups(session, course).names.values()


def test_the_api_commit_step_rolls_back_and_lets_the_error_through(app):
    with app.test_request_context():
        session = get_session()
        course = readmodel.load_course(session, C)
        with pytest.raises(ConflictError), committing(session):
            courses.add_group(session, course, "G8")
            courses.add_group(session, course, "G8")
        assert "G8" not in readmodel.load_groups(session, course).names.values()
        with pytest.raises(RuntimeError), committing(session):
            courses.add_group(session, course, "G7")
            raise RuntimeError("not a service error")
        assert "G7" not in readmodel.load_groups(session, course).names.values()


@pytest.mark.parametrize(
    ("n_items", "page", "expected"),
    [(0, 1, (1, 1)), (50, 2, (1, 1)), (51, 2, (2, 2)), (120, 0, (1, 3)), (120, 9, (3, 3))],
)
def test_plan_pages(n_items, page, expected):
    assert readmodel.plan_pages(n_items, page) == expected
