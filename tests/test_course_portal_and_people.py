"""The first hour, follow-ups: who moves a course to another portal, what a portal manager
finds in "Find a person", and the course page's students by name as French readers expect."""

from __future__ import annotations

import html
import re

import pytest

from coursehub.catalog.admin import add_manager
from coursehub.catalog.courses import get_course, get_portal
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import Portal, Role
from coursehub.catalog.readmodel import MemberRow, plan_name_order, plan_team_order
from coursehub.web.access import plan_move_refusal
from coursehub.web.identity import Identity
from coursehub.web.testing import api_headers, identity_headers
from helpers import csrf_token

C = "/courses/mlmeca-2025"
A = "/api/v1/courses/mlmeca-2025"
LEAD = identity_headers(Identity("mbuffat"))
MANAGER = identity_headers(Identity("pmanager"))
ADMIN = identity_headers(Identity("root", admin=True))


def in_catalog(url: str, change) -> None:
    """Run ``change(session)`` on the catalog at ``url`` and commit."""
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            change(session)
    finally:
        engine.dispose()


def manage(url: str, username: str, *codes: str) -> None:
    in_catalog(url, lambda s: [add_manager(s, get_portal(s, code), username) for code in codes])


def portal_of(url: str, course_id: str) -> str:
    found: list[str] = []
    in_catalog(url, lambda s: found.append(get_course(s, course_id).portal.code))
    return found[0]


# moving a course to another portal -----------------------------------------------------------


def portal(pk: int, code: str) -> Portal:
    return Portal(id=pk, code=code, name=code)


MECA, INFO = portal(1, "MECA"), portal(2, "INFO")


@pytest.mark.parametrize(
    ("admin", "managed", "target", "allowed"),
    [
        (True, [], INFO, True),
        (False, [MECA, INFO], INFO, True),
        (False, [MECA], MECA, True),  # staying is no move
        (False, [], MECA, True),
        (False, [MECA], INFO, False),
        (False, [INFO], INFO, False),
        (False, [], INFO, False),
    ],
)
def test_only_admins_and_managers_of_both_portals_move_a_course(admin, managed, target, allowed):
    reason = plan_move_refusal("mlmeca-2025", MECA, target, admin, managed)
    assert (reason == "") is allowed
    if not allowed:
        assert reason == (
            "only an admin or a manager of both portals MECA (now: none yet) and INFO "
            "(now: none yet) can move course mlmeca-2025 to portal INFO"
        )


def test_a_leads_edit_form_shows_the_portal_read_only(client):
    text = client.get(f"{C}/edit", headers=LEAD).get_data(as_text=True)
    assert 'name="portal"' not in text
    assert "<strong>Portal:</strong> MECA · Mécanique" in text
    assert "Only an admin or a manager of both portals can move this course" in text


def test_a_lead_who_posts_another_portal_is_refused_and_nothing_changes(app, database_url):
    client = app.test_client()
    token = csrf_token(client.get(f"{C}/edit", headers=LEAD).get_data(as_text=True))
    data = {"title": "Hijacked", "portal": "INFO", "csrf_token": token}
    refused = client.post(f"{C}/edit", data=data, headers=LEAD)
    assert refused.status_code == 403
    assert "a manager of both portals MECA (now: none yet) and INFO" in refused.get_data(
        as_text=True
    )
    assert portal_of(database_url, "mlmeca-2025") == "MECA"
    assert "Hijacked" not in client.get(f"{C}/", headers=LEAD).get_data(as_text=True)


def test_a_lead_cannot_move_the_course_through_the_api(app, database_url):
    refused = app.test_client().patch(A, json={"portal": "INFO"}, headers=api_headers("lead"))
    assert refused.status_code == 403
    assert "can move course mlmeca-2025 to portal INFO" in refused.get_json()["error"]
    assert portal_of(database_url, "mlmeca-2025") == "MECA"


def test_a_manager_of_one_portal_is_offered_only_that_portal(app, database_url):
    manage(database_url, "pmanager", "MECA")
    text = app.test_client().get(f"{C}/edit", headers=MANAGER).get_data(as_text=True)
    assert re.findall(r'<option[^>]*value="(\w+)"', text) == ["MECA"]


def test_a_manager_of_both_portals_moves_the_course_from_the_form(app, database_url):
    manage(database_url, "pmanager", "MECA", "INFO")
    client = app.test_client()
    page = client.get(f"{C}/edit", headers=MANAGER).get_data(as_text=True)
    assert re.findall(r'<option[^>]*value="(\w+)"', page) == ["MECA", "INFO"]
    data = {"title": "Machine learning", "portal": "INFO", "csrf_token": csrf_token(page)}
    moved = client.post(f"{C}/edit", data=data, headers=MANAGER)
    assert moved.status_code == 302, moved.get_data(as_text=True)
    assert portal_of(database_url, "mlmeca-2025") == "INFO"


def test_the_year_of_a_course_is_fixed_even_for_an_admin(client):
    refused = client.patch(A, json={"year": "2026-2027"}, headers=api_headers("admin"))
    assert refused.status_code == 400
    assert refused.get_json()["fields"] == {"year": "is not a known field"}


# "Find a person" for portal managers ---------------------------------------------------------


def test_a_portal_manager_finds_teams_anywhere_and_students_of_their_portals_only(
    app, database_url
):
    manage(database_url, "pmanager", "INFO")  # OTHER: lead oteacher, student p2509001
    client = app.test_client()
    home = client.get("/", headers=MANAGER).get_data(as_text=True)
    assert ">Find a person<" in home
    students = html.unescape(client.get("/people/?q=p25", headers=MANAGER).get_data(as_text=True))
    assert "p2509001" in students and "other-2025</a> (student)" in students
    assert "p2500001" not in students  # a student of MECA, a portal pmanager does not manage
    leads = client.get("/people/?q=buffat", headers=MANAGER).get_data(as_text=True)
    assert "mbuffat" in leads and "mlmeca-2025</a> (lead)" in leads


def test_a_manager_of_a_portal_without_courses_may_search_team_members(app, database_url):
    in_catalog(database_url, lambda s: s.add(Portal(code="PHYS", name="Physique")))
    manage(database_url, "pmanager", "PHYS")
    found = app.test_client().get("/people/?q=dupont", headers=MANAGER)
    assert found.status_code == 200 and "tdupont" in found.get_data(as_text=True)


def test_a_student_may_not_search_for_people(client):
    refused = client.get("/people/?q=p25", headers=identity_headers(Identity("p2500001")))
    assert refused.status_code == 403
    assert "only admins, portal managers and teaching teams" in refused.get_data(as_text=True)


# names as French readers expect --------------------------------------------------------------


def row(last: str, first: str, username: str, role: Role = Role.STUDENT) -> MemberRow:
    return MemberRow(username, first, last, None, username, role, "")


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [row("Zola", "Émile", "p1"), row("Çelik", "Ali", "p2"), row("Dupont", "Eve", "p3")],
            ["Çelik", "Dupont", "Zola"],
        ),
        (
            [row("Eve", "X", "p1"), row("Émile", "X", "p2"), row("Ezra", "X", "p3")],
            ["Émile", "Eve", "Ezra"],
        ),
        ([row("Martin", "Zoé", "p1"), row("Martin", "Élise", "p2")], ["Martin", "Martin"]),
        ([row("Roux", "A", "p9"), row("Roux", "A", "p1")], ["Roux", "Roux"]),
    ],
)
def test_members_are_ordered_by_last_then_first_name_with_accents_among_their_letter(
    rows, expected
):
    ordered = plan_name_order(rows)
    assert [r.last_name for r in ordered] == expected
    assert [r.first_name for r in ordered if r.last_name == "Martin"] in ([], ["Élise", "Zoé"])


def test_equal_names_are_ordered_by_username_and_the_team_by_role_first():
    assert [r.username for r in plan_name_order([row("A", "B", "p9"), row("A", "B", "p1")])] == [
        "p1",
        "p9",
    ]
    team = [row("Abel", "A", "t1", Role.GRADER), row("Zola", "E", "l1", Role.LEAD)]
    team.append(row("Çelik", "A", "t2", Role.TEACHER))
    team.append(row("Bernard", "A", "t3", Role.TEACHER))
    assert [r.username for r in plan_team_order(team)] == ["l1", "t3", "t2", "t1"]


def enrol(url: str, people: list[tuple[str, str, str, str | None]]) -> None:
    """Enrol ``(username, first, last, student_number)`` students in mlmeca-2025."""

    def add(session) -> None:
        course = get_course(session, "mlmeca-2025")
        for username, first, last, number in people:
            add_member(
                session,
                course,
                username,
                Role.STUDENT,
                first_name=first,
                last_name=last,
                student_number=number,
            )

    in_catalog(url, add)


def test_the_course_page_shows_students_first_last_sorted_as_in_french(app, database_url):
    enrol(
        database_url,
        [
            ("p2500010", "Émile", "Zola", "p2500010"),
            ("p2500011", "Ayşe", "Çelik", "p2500011"),
            ("p2500012", "Éric", "Durand", "p2500012"),
        ],
    )
    client = app.test_client()
    text = client.get(f"{C}/", headers=LEAD).get_data(as_text=True)
    section = text.split('id="students-title"')[1]
    names = re.findall(r"<tr><td>([^<]+)</td><td class=\"code\">p25", section)
    assert [html.unescape(n) for n in names] == [
        "Ayşe Çelik",
        "Éric Durand",
        "Anaïs Lefèvre",
        "Chloé Moreau",
        "Dimitri N'Diaye",
        "Björn Ølsen",
        "Émile Zola",
    ]
    api = client.get(A, headers=api_headers("lead")).get_json()["students"]
    order = ["p2500011", "p2500012", "p2500001", "p2500003", "p2500004", "p2500002", "p2500010"]
    assert [s["username"] for s in api] == order


def test_one_id_column_when_every_username_is_the_student_number(app, database_url):
    client = app.test_client()
    same = client.get(f"{C}/", headers=LEAD).get_data(as_text=True)
    assert "Username (student number)" in same and ">Student number</th>" not in same
    enrol(database_url, [("jdoe", "Jane", "Doe", "2500099")])
    differ = client.get(f"{C}/", headers=LEAD).get_data(as_text=True)
    assert "Username (student number)" not in differ
    assert ">Student number</th>" in differ and '<td class="code">2500099</td>' in differ
