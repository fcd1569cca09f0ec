"""Catalog services on SQLite and PostgreSQL: years, portals, courses, people, profiles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError, StatementError

from coursehub.catalog import courses, members, people, profiles, readmodel
from coursehub.catalog.errors import ConflictError, NotFoundError, ValidationError
from coursehub.catalog.models.courses import TEAM_ROLES, Membership, Person, Role
from coursehub.catalog.seed import DEMO_MEMBERS, seed_demo


@pytest.fixture
def year_portal(session):
    year = courses.create_year(session, "2025-2026")
    portal = courses.create_portal(session, "MECA", "Mécanique")
    return year, portal


@pytest.mark.parametrize(
    ("code", "year", "expected"),
    [
        ("MLMECA", 2025, "mlmeca-2025"),
        ("INF 2032L", 2024, "inf-2032l-2024"),
        ("a.b__c", 2030, "a-b-c-2030"),
    ],
)
def test_make_course_id(code, year, expected):
    assert courses.make_course_id(code, year) == expected


@pytest.mark.parametrize("label", ["2025", "2025-2027", "25-26", "2025/2026"])
def test_year_label_must_be_consecutive_years(label):
    with pytest.raises(ValidationError, match="2025-2026"):
        courses.parse_year_label(label)


def test_years_newest_first_and_active_flag(session):
    old = courses.create_year(session, "2024-2025")
    new = courses.create_year(session, "2025-2026")
    courses.set_year_active(session, old, False)
    assert courses.list_years(session) == [new, old]
    assert courses.list_years(session, active_only=True) == [new]
    with pytest.raises(ConflictError, match="2025-2026 already exists"):
        courses.create_year(session, "2025-2026")


def test_create_course_derives_course_id_and_is_unique(session, year_portal):
    year, portal = year_portal
    course = courses.create_course(session, "MLMECA", "ML for mechanics", year, portal)
    session.commit()
    assert course.course_id == "mlmeca-2025"
    assert courses.get_course(session, "mlmeca-2025") is course
    with pytest.raises(ConflictError, match="mlmeca-2025 already exists"):
        courses.create_course(session, "mlmeca", "Other title", year, portal)


def test_create_course_rejects_bad_code_and_empty_title(session, year_portal):
    year, portal = year_portal
    with pytest.raises(ValidationError, match="UE code"):
        courses.create_course(session, "ML MECA!", "Title", year, portal)
    with pytest.raises(ValidationError, match="title is empty"):
        courses.create_course(session, "MLMECA", "  ", year, portal)


def test_get_missing_objects_raise_not_found(session):
    for call in (
        lambda: courses.get_course(session, "nope-2025"),
        lambda: courses.get_year(session, "2000-2001"),
        lambda: courses.get_portal(session, "NOPE"),
        lambda: people.get_person(session, "nobody"),
        lambda: profiles.get_profile(session, "nope"),
    ):
        with pytest.raises(NotFoundError, match="no "):
            call()


def test_update_and_archive_course(session, year_portal):
    year, portal = year_portal
    course = courses.create_course(session, "MLMECA", "Old", year, portal)
    other = courses.create_portal(session, "INFO", "Informatique")
    courses.update_course(session, course, title=" New ", portal=other, description="d")
    assert (course.title, course.portal.code, course.description) == ("New", "INFO", "d")
    with pytest.raises(ValidationError, match="cannot edit code"):
        courses.update_course(session, course, code="X")
    courses.archive_course(session, course)
    assert courses.list_courses(session) == []
    assert courses.list_courses(session, include_archived=True) == [course]


def test_groups_are_unique_per_course_and_checked(session, year_portal):
    course = courses.create_course(session, "MLMECA", "T", *year_portal)
    courses.add_group(session, course, "G1", "TD")
    courses.add_group(session, course, "G1b", "TP")
    with pytest.raises(ConflictError, match="already has a group G1"):
        courses.add_group(session, course, "G1")
    with pytest.raises(ValidationError, match="TD or TP"):
        courses.add_group(session, course, "G2", "CM")
    with pytest.raises(ValidationError, match="group name"):
        courses.add_group(session, course, "G 2")
    assert [(g.name, g.kind) for g in course.groups] == [("G1", "TD"), ("G1b", "TP")]


def test_remove_group_keeps_its_students(session, year_portal):
    course = courses.create_course(session, "MLMECA", "T", *year_portal)
    group = courses.add_group(session, course, "G1")
    member = members.add_member(session, course, "p1", Role.STUDENT, group, last_name="A")
    courses.remove_group(session, course, "G1")
    session.commit()
    assert member.group is None and member in session.scalars(course.memberships.select())
    with pytest.raises(NotFoundError, match="no group"):
        courses.get_group(course, "G1")


def test_database_enforces_unique_membership(session, year_portal):
    course = courses.create_course(session, "MLMECA", "T", *year_portal)
    person = people.ensure_person(session, "alice")
    session.add_all([Membership(person=person, course=course, role="student") for _ in range(2)])
    with pytest.raises(IntegrityError):
        session.flush()


def test_an_unknown_role_is_refused_by_the_model_and_by_the_database(session, year_portal):
    course = courses.create_course(session, "MLMECA", "T", *year_portal)
    bob = people.ensure_person(session, "bob")
    session.add(Membership(person=bob, course=course, role="boss"))
    with pytest.raises(StatementError, match="boss"):
        session.flush()
    session.rollback()
    course = courses.create_course(session, "MLMECA", "T", *year_portal)
    bob = people.ensure_person(session, "bob")
    raw = text("INSERT INTO memberships (person_pk, course_pk, role) VALUES (:p, :c, 'boss')")
    with pytest.raises(IntegrityError, match="role"):
        session.execute(raw, {"p": bob.id, "c": course.id})


def test_team_members_add_change_remove(session, year_portal):
    course = courses.create_course(session, "MLMECA", "T", *year_portal)
    members.add_member(session, course, " TDupont ", "teacher", first_name="Thérèse")
    assert members.role_in(session, "tdupont", course) == Role.TEACHER
    members.add_member(session, course, "tdupont", Role.LEAD)
    assert members.role_in(session, "TDUPONT", course) == Role.LEAD
    assert readmodel.count_members(session, course) == 1
    assert people.get_person(session, "tdupont").first_name == "Thérèse"
    with pytest.raises(ConflictError, match="tdupont is the last lead of mlmeca-2025"):
        members.remove_member(session, course, "tdupont")
    members.add_member(session, course, "mbuffat", Role.LEAD)
    members.remove_member(session, course, "tdupont")
    assert members.role_in(session, "tdupont", course) is None
    assert people.find_person(session, "tdupont") is not None
    with pytest.raises(NotFoundError, match="not in course"):
        members.remove_member(session, course, "tdupont")
    with pytest.raises(ValidationError, match="role 'boss'"):
        members.add_member(session, course, "x", "boss")


def test_member_group_must_belong_to_the_course(session, year_portal):
    year, portal = year_portal
    first = courses.create_course(session, "A1", "A", year, portal)
    second = courses.create_course(session, "B1", "B", year, portal)
    group = courses.add_group(session, second, "G1")
    with pytest.raises(ValidationError, match="not a group of course a1-2025"):
        members.add_member(session, first, "alice", Role.STUDENT, group)


def test_person_validation(session):
    with pytest.raises(ValidationError, match="not an e-mail"):
        people.ensure_person(session, "alice", email="alice.example.org")
    with pytest.raises(ValidationError, match="username"):
        people.ensure_person(session, "al ice")
    people.ensure_person(session, "alice", student_number="123")
    with pytest.raises(ConflictError, match="123 belongs to alice"):
        people.ensure_person(session, "bob", student_number="123")


def test_seed_detail_and_tree(session):
    course = seed_demo(session)
    session.commit()
    session.expunge_all()
    course = readmodel.load_course(session, "mlmeca-2025")
    groups = readmodel.load_groups(session, course)
    team = readmodel.load_team(session, course, groups.names)
    assert [m.role for m in team] == [Role.LEAD, Role.TEACHER, Role.GRADER]
    students = [u for u, *_, role, _ in DEMO_MEMBERS if role == Role.STUDENT]
    listed = readmodel.load_students(session, course, groups.names)
    assert sorted(m.username for m in listed) == sorted(students)
    assert [(g.name, g.n_students) for g in groups.rows] == [("G1", 2), ("G2", 2)]
    assert course.profile is not None and course.profile.name == "gpu-lstm"
    assert course.material is not None and course.material.subpath == "notebooks"
    assert course.last_sync_at is None
    tree = courses.catalog_tree(session)
    assert [
        (y.label, p.code, [c.course_id for c in cs])
        for y, ps in tree.items()
        for p, cs in ps.items()
    ] == [("2025-2026", "MECA", ["mlmeca-2025"])]
    assert [p.code for p in courses.list_portals(session, course.year)] == ["MECA"]


def test_names_keep_accents_through_the_database(session):
    seed_demo(session)
    session.commit()
    session.expunge_all()
    assert session.scalar(select(Person.last_name).where(Person.username == "p2500002")) == "Ølsen"


def test_visible_courses_by_role(session, year_portal):
    year, portal = year_portal
    seen = courses.create_course(session, "A1", "A", year, portal)
    courses.create_course(session, "B1", "B", year, portal)
    members.add_member(session, seen, "alice", Role.STUDENT)
    members.add_member(session, seen, "tom", Role.GRADER)
    assert members.visible_courses(session, "Alice") == [seen]
    assert members.visible_courses(session, "alice", roles=TEAM_ROLES) == []
    assert members.visible_courses(session, "tom", roles=TEAM_ROLES) == [seen]
    assert len(members.visible_courses(session, "nobody", is_admin=True)) == 2
    assert members.visible_courses(session, "nobody") == []


def test_search_people_across_courses(session, year_portal):
    year, portal = year_portal
    first = courses.create_course(session, "A1", "A", year, portal)
    second = courses.create_course(session, "B1", "B", year, portal)
    for course in (first, second):
        members.add_member(session, course, "p123", last_name="Lefèvre", student_number="p123")
    members.add_member(session, first, "p999", last_name="Martin")
    session.commit()
    found = people.search_people(session, "lefè")
    assert [p.username for p in found] == ["p123"]
    where = people.courses_of(session, found)[found[0].id]
    assert [(c.course_id, c.role) for c in where] == [
        ("a1-2025", "student"),
        ("b1-2025", "student"),
    ]
    assert [p.username for p in people.search_people(session, "P99")] == ["p999"]


def test_record_sync_times_come_back_in_utc(session, year_portal):
    course = courses.create_course(session, "A1", "A", *year_portal)
    paris = timezone(timedelta(hours=2))
    courses.record_sync(session, course, "ok", at=datetime(2025, 9, 1, 10, 0, tzinfo=paris))
    session.commit()
    session.expire_all()
    assert course.last_sync_status == "ok"
    assert course.last_sync_at == datetime(2025, 9, 1, 8, 0, tzinfo=UTC)
    assert course.last_sync_at.tzinfo is not None and course.created_at.tzinfo is not None


def test_profiles_crud_and_thread_default(session, year_portal):
    profile = profiles.create_profile(session, "std", cpu_limit=2.5, mem_limit="4G")
    assert (profile.mem_limit, profile.n_threads, profile.gpus, profile.jobs_per_gpu) == (
        4 * 1024**3,
        2,
        0,
        1,
    )
    profiles.update_profile(session, profile, cpu_limit=0.5)
    assert profile.n_threads == 1
    profiles.update_profile(session, profile, n_threads=3, mem_limit=1000)
    assert (profile.n_threads, profile.mem_limit, profile.cpu_limit) == (3, 1000, 0.5)
    course = courses.create_course(session, "A1", "A", *year_portal, profile=profile)
    with pytest.raises(ConflictError, match="used by a1-2025"):
        profiles.delete_profile(session, profile)
    courses.update_course(session, course, profile=None)
    profiles.delete_profile(session, profile)
    assert profiles.list_profiles(session) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cpu_limit": 0, "mem_limit": "1G"}, "cpu_limit"),
        ({"cpu_limit": 1, "mem_limit": "lots"}, "memory size"),
        ({"cpu_limit": 1, "mem_limit": "1G", "gpus": -1}, "gpus"),
        ({"cpu_limit": 1, "mem_limit": "1G", "jobs_per_gpu": 0}, "jobs_per_gpu"),
        ({"cpu_limit": 1, "mem_limit": "1G", "n_threads": 1.5}, "n_threads"),
    ],
)
def test_profile_validation_names_the_field(session, kwargs, message):
    with pytest.raises(ValidationError, match=f"profile '?p'?: .*{message}"):
        profiles.create_profile(session, "p", **kwargs)


def test_profile_names_are_unique(session):
    profiles.create_profile(session, "p", cpu_limit=1, mem_limit="1G")
    with pytest.raises(ConflictError, match="profile p already exists"):
        profiles.create_profile(session, "p", cpu_limit=2, mem_limit="1G")


# identity belongs to the person; a course keeps a lead ------------------------------------------

from coursehub.catalog.errors import ForbiddenError, IdentityError  # noqa: E402
from coursehub.catalog.rules import (  # noqa: E402
    Actor,
    check_role_change,
    identity_changes,
    may_change_identity,
)

TEACHER = Actor("tdupont", role=Role.TEACHER)
LEAD = Actor("mbuffat", role=Role.LEAD)
ADMIN = Actor("root", admin=True)


@pytest.mark.parametrize(
    ("actor", "courses_of_person", "expected"),
    [
        (TEACHER, {1}, True),  # only in the teacher's course
        (TEACHER, {1, 2}, False),  # also in another course
        (TEACHER, {2}, False),  # only in another course
        (TEACHER, set(), False),  # in no course
        (LEAD, {1, 2}, False),
        (ADMIN, {2}, True),
        (ADMIN, set(), True),
    ],
)
def test_who_may_change_a_persons_identity(actor, courses_of_person, expected):
    assert may_change_identity(actor, courses_of_person, 1) is expected


@pytest.mark.parametrize(
    ("actor", "role_of_person", "expected"),
    [
        (TEACHER, Role.LEAD, False),  # a teacher may not rename or re-mail the lead
        (LEAD, Role.LEAD, True),
        (ADMIN, Role.LEAD, True),
        (TEACHER, Role.TEACHER, True),
        (TEACHER, Role.STUDENT, True),
        (Actor("gmartin", role=Role.GRADER), Role.LEAD, False),
    ],
)
def test_only_a_lead_or_an_admin_may_change_a_leads_identity(actor, role_of_person, expected):
    assert may_change_identity(actor, {1}, 1, role_of_person) is expected


def test_identity_changes_list_old_and_new_and_ignore_empty_values():
    current = {"first_name": "Chloé", "last_name": "Moreau", "email": None}
    given = {"first_name": "", "last_name": "Moreau-Durand", "email": "c@x.org"}
    assert identity_changes(current, given) == (
        ("last_name", "Moreau", "Moreau-Durand"),
        ("email", None, "c@x.org"),
    )
    assert identity_changes(current, {"last_name": "Moreau"}) == ()


@pytest.mark.parametrize(
    ("actor", "target", "current", "new", "leads", "error"),
    [
        (
            TEACHER,
            "mbuffat",
            Role.LEAD,
            Role.STUDENT,
            ["mbuffat"],
            r"mbuffat\), a manager of its portal or a hub admin",
        ),
        (TEACHER, "mbuffat", Role.LEAD, None, ["mbuffat", "x"], "only a lead"),
        (TEACHER, "tdupont", Role.TEACHER, Role.LEAD, ["mbuffat"], "only a lead"),
        (TEACHER, "new", None, Role.LEAD, ["mbuffat"], "only a lead"),
        (LEAD, "mbuffat", Role.LEAD, Role.TEACHER, ["mbuffat"], "mbuffat is the last lead of c"),
        (LEAD, "mbuffat", Role.LEAD, None, ["mbuffat"], "the last lead"),
        (ADMIN, "mbuffat", Role.LEAD, None, ["mbuffat"], "the last lead"),
        (LEAD, "mbuffat", Role.LEAD, None, ["mbuffat", "x"], None),
        (LEAD, "tdupont", Role.TEACHER, Role.LEAD, ["mbuffat"], None),
        (ADMIN, "x", Role.LEAD, Role.STUDENT, ["mbuffat", "x"], None),
        (TEACHER, "p1", Role.STUDENT, Role.GRADER, ["mbuffat"], None),
        (TEACHER, "p1", Role.STUDENT, None, ["mbuffat"], None),
        (TEACHER, "mbuffat", Role.LEAD, Role.LEAD, ["mbuffat"], None),
    ],
)
def test_lead_rules(actor, target, current, new, leads, error):
    if error is None:
        check_role_change("c-2025", actor, target, current, new, leads)
        return
    with pytest.raises((ForbiddenError, ConflictError), match=error):
        check_role_change("c-2025", actor, target, current, new, leads)


def test_a_teacher_cannot_rename_a_person_of_another_course(session, year_portal):
    year, portal = year_portal
    mine = courses.create_course(session, "A1", "A", year, portal)
    theirs = courses.create_course(session, "B1", "B", year, portal)
    members.add_member(session, theirs, "olead", Role.LEAD, first_name="Olga", email="o@x.org")
    session.commit()
    with pytest.raises(IdentityError) as info:
        members.add_member(
            session, mine, "olead", first_name="Hijacked", email="evil@x.org", actor=TEACHER
        )
    assert str(info.value) == (
        "olead exists outside a1-2025: only a hub admin may change their first name, e-mail; "
        "leave these fields empty to add them as they are"
    )
    session.rollback()
    person = people.get_person(session, "olead")
    assert (person.first_name, person.email) == ("Olga", "o@x.org")
    members.add_member(session, mine, "olead", actor=TEACHER)  # as they are: fine
    members.add_member(session, mine, "olead", first_name="Olga", actor=TEACHER)  # same: fine
    assert members.role_in(session, "olead", mine) == Role.STUDENT


@pytest.mark.parametrize(
    "fields",
    [
        {"first_name": "A\x00"},
        {"last_name": "B\u2028C"},
        {"email": "a\x00@b.org"},
        {"student_number": "1\x7f"},
        {"first_name": "x" * 201},
    ],
)
def test_names_with_control_characters_never_reach_the_database(session, year_portal, fields):
    course = courses.create_course(session, "A1", "A", *year_portal)
    with pytest.raises(ValidationError, match=r"control character|longer than"):
        members.add_member(session, course, "alice", **fields)
