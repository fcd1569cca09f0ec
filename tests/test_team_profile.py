"""A course's team profile: stored in the catalog (SQLite and PostgreSQL), copied with the
course, synced to the team's hub group, and chosen at spawn by the user's role in each course."""

from __future__ import annotations

import pytest

from coursehub.catalog import courses, members, profiles
from coursehub.catalog.errors import ConflictError
from coursehub.catalog.models.courses import Role, team_profile_of
from coursehub.catalog.rollover import copy_course
from coursehub.contract import make_profile, profile_to_json, student_group, team_group
from coursehub.hub.reconcile import desired_from_courses
from coursehub.hub.sync import course_specs
from coursehub.spawn.profiles import choose_profile, plan_choices, render_options_form

SMALL = make_profile("small", cpu_limit=1, mem_limit="1G")
BIG = make_profile("big", cpu_limit=4, mem_limit="8G")
MID = make_profile("mid", cpu_limit=2, mem_limit="2G")


def _group(name, profile, title=None):
    props = {"coursehub": True, "profile": profile_to_json(profile)}
    if title:
        props["title"] = title
    return name, props


@pytest.fixture
def two_courses(session):
    """Course A (students small, team big) and course B (students mid, no team profile)."""
    year = courses.create_year(session, "2025-2026")
    portal = courses.create_portal(session, "MECA", "Mécanique")
    small = profiles.create_profile(session, "small", cpu_limit=1, mem_limit="1G")
    big = profiles.create_profile(session, "big", cpu_limit=4, mem_limit="8G")
    mid = profiles.create_profile(session, "mid", cpu_limit=2, mem_limit="2G")
    a = courses.create_course(session, "A", "Course A", year, portal, profile=small)
    courses.update_course(session, a, team_profile=big)
    b = courses.create_course(session, "B", "Course B", year, portal, profile=mid)
    members.add_member(session, a, "tdupont", Role.TEACHER)
    members.add_member(session, b, "tdupont", Role.STUDENT)
    members.add_member(session, a, "p2501002", Role.STUDENT)
    members.add_member(session, a, "mlead", Role.LEAD)
    members.add_member(session, a, "agrader", Role.GRADER)
    return a, b


# --- spawn: the course choice picks the profile of the user's role in it -------------------


def test_a_teacher_gets_the_team_profile_and_a_student_the_students_one():
    groups = [_group("nbgrader-a", SMALL), _group("formgrade-a", BIG)]
    [teacher] = plan_choices([groups[1]])
    [student] = plan_choices([groups[0]])
    assert (teacher.profile, teacher.role) == (BIG, "team")
    assert (student.profile, student.role) == (SMALL, "students")


@pytest.mark.parametrize("order", [1, -1])
def test_a_team_member_also_in_the_student_group_gets_the_team_profile(order):
    [choice] = plan_choices([_group("nbgrader-a", SMALL), _group("formgrade-a", BIG)][::order])
    assert choice.profile == BIG and choice.role == "team"


def test_teacher_in_a_and_student_in_b_gets_each_profile_in_its_place():
    groups = [_group("formgrade-a", BIG, "Course A"), _group("nbgrader-b", MID, "Course B")]
    choices = plan_choices(groups)
    assert [(c.course_id, c.profile, c.role) for c in choices] == [
        ("a", BIG, "team"),
        ("b", MID, "students"),
    ]
    assert choose_profile(choices, "a") == BIG
    assert choose_profile(choices, "b") == MID
    form = render_options_form(choices)
    assert "Course A [a] (team) (4 CPU" in form and "Course B [b] (2 CPU" in form


def test_two_years_of_a_course_with_one_title_are_told_apart_on_the_spawn_page():
    groups = [
        _group("formgrade-a-2025", BIG, "Course A"),
        _group("formgrade-a-2026", BIG, "Course A"),
    ]
    form = render_options_form(plan_choices(groups))
    assert "Course A [a-2025] (team)" in form and "Course A [a-2026] (team)" in form


# --- catalog ------------------------------------------------------------------------------


def test_a_course_without_a_team_profile_gives_its_team_the_students_one(two_courses):
    a, b = two_courses
    assert (a.profile.name, a.team_profile.name, team_profile_of(a).name) == (
        "small",
        "big",
        "big",
    )
    assert b.team_profile is None and team_profile_of(b).name == "mid"


def test_a_team_profile_in_use_cannot_be_deleted(session, two_courses):
    a, _ = two_courses
    with pytest.raises(ConflictError, match=f"profile big is used by {a.course_id}"):
        profiles.delete_profile(session, a.team_profile)


def test_a_course_copy_carries_its_team_profile(session, two_courses):
    a, b = two_courses
    next_year = courses.create_year(session, "2026-2027")
    copy_a = copy_course(session, a, next_year)
    copy_b = copy_course(session, b, next_year)
    assert (copy_a.profile.name, copy_a.team_profile.name) == ("small", "big")
    assert (copy_b.profile.name, copy_b.team_profile) == ("mid", None)


# --- sync: each group gets its role's profile ----------------------------------------------


def test_the_sync_writes_the_students_and_the_team_profile_on_their_own_groups(
    session, two_courses
):
    a, b = two_courses
    groups = desired_from_courses(course_specs(session)).groups
    profile_of = {
        n: g.properties["profile"]["name"] for n, g in groups.items() if "-a-" in n or "-b-" in n
    }
    assert profile_of[student_group(a.course_id)] == "small"
    assert profile_of[team_group(a.course_id)] == "big"
    assert profile_of[student_group(b.course_id)] == "mid"
    assert profile_of[team_group(b.course_id)] == "mid"  # no team profile: the students'
    assert groups[team_group(a.course_id)].properties["title"] == "Course A"


def test_from_catalog_to_spawn_plan_per_person(session, two_courses):
    a, b = two_courses
    groups = desired_from_courses(course_specs(session)).groups

    def choices_of(username):
        own = [(g.name, g.properties) for g in groups.values() if username in g.users]
        return {c.course_id: (c.profile.name, c.role) for c in plan_choices(own)}

    assert choices_of("tdupont") == {a.course_id: ("big", "team"), b.course_id: ("mid", "students")}
    assert choices_of("p2501002") == {a.course_id: ("small", "students")}
    for username in ("mlead", "agrader"):
        assert choices_of(username) == {a.course_id: ("big", "team")}
