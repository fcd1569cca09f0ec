"""Roster import on SQLite and PostgreSQL: plan (preview), apply (all or nothing), CLI."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from coursehub.catalog import courses, people
from coursehub.catalog import members as catalog_members
from coursehub.catalog.db import session_factory
from coursehub.catalog.errors import ConflictError, NotFoundError, RosterError, ValidationError
from coursehub.catalog.models.courses import Membership, Person, Role
from coursehub.catalog.roster import apply as roster_apply
from coursehub.catalog.roster.apply import apply_roster, import_roster
from coursehub.catalog.roster.parse import RosterRow, parse_roster
from coursehub.catalog.roster.plan import MemberState, RosterPlan, plan_changes, plan_roster
from coursehub.catalog.roster.preview import render_plan
from coursehub.catalog.seed import DEMO_MEMBERS, seed_demo
from coursehub.cli import main

HEADER = "N° étudiant;Nom;Prénom;Courriel;Groupe\r\n"


def roster(*lines: str, encoding: str = "utf-8-sig") -> bytes:
    return (HEADER + "".join(line + "\r\n" for line in lines)).encode(encoding)


@pytest.fixture
def course(session):
    course = seed_demo(session)
    session.commit()
    return course


def snapshot(engine):
    """Every person and membership, as plain tuples, read in a fresh session."""
    with session_factory(engine)() as fresh:
        persons = fresh.execute(
            select(
                Person.username,
                Person.first_name,
                Person.last_name,
                Person.email,
                Person.student_number,
            ).order_by(Person.username)
        ).all()
        members = fresh.execute(
            select(Person.username, Membership.role, Membership.group_pk)
            .join(Membership.person)
            .order_by(Person.username)
        ).all()
    return persons, members


def students(session, course):
    session.expire_all()
    query = (
        select(Person.username)
        .join(Membership.person)
        .where(Membership.course_pk == course.id, Membership.role == "student")
        .order_by(Person.username)
    )
    return list(session.scalars(query))


def test_add_mode_adds_and_updates(session, course):
    data = roster(
        "p2500001;Lefèvre;Anaïs;anais@etu.example.fr;G1",
        "p2500005;Martin;Élodie;;G2",
        "p2500006;Nguyen;Bảo;bao@etu.example.fr;G3",
    )
    plan = plan_roster(session, course, parse_roster(data))
    assert [r.username for r in plan.additions] == ["p2500005", "p2500006"]
    assert [(u.row.username, u.fields) for u in plan.updates] == [("p2500001", ("email",))]
    assert plan.removals == [] and plan.unchanged == 0 and plan.new_groups == ["G3"]
    apply_roster(session, plan)
    assert students(session, course) == [f"p250000{i}" for i in (1, 2, 3, 4, 5, 6)]
    person = people.get_person(session, "p2500006")
    assert (person.first_name, person.email, person.student_number) == (
        "Bảo",
        "bao@etu.example.fr",
        "p2500006",
    )
    assert catalog_members.get_membership(session, course, "p2500006").group.name == "G3"
    assert people.get_person(session, "p2500001").email == "anais@etu.example.fr"


def test_reimport_is_unchanged(session, course):
    data = roster("p2500009;Roux;Léa;lea@etu.example.fr;G1")
    import_roster(session, course.course_id, data)
    plan = import_roster(session, course.course_id, data)
    assert plan.is_empty and plan.unchanged == 1


def test_sync_mode_removes_missing_students_only(session, course, engine):
    data = roster("p2500001;Lefèvre;Anaïs;;G1", "p2500003;Moreau;Chloé;;G2")
    plan = import_roster(session, course.course_id, data, mode="sync")
    assert sorted(m.username for m in plan.removals) == ["p2500002", "p2500004"]
    assert students(session, course) == ["p2500001", "p2500003"]
    assert catalog_members.role_in(session, "mbuffat", course) == Role.LEAD
    assert people.find_person(session, "p2500002") is not None


def test_sync_with_group_only_touches_that_group(session, course):
    data = roster("p2500001;Lefèvre;Anaïs;;", "p2500007;Petit;Noé;;")
    plan = import_roster(session, course.course_id, data, mode="sync", group="G1")
    assert [m.username for m in plan.removals] == ["p2500002"]
    assert [r.username for r in plan.additions] == ["p2500007"]
    assert students(session, course) == ["p2500001", "p2500003", "p2500004", "p2500007"]
    assert catalog_members.get_membership(session, course, "p2500007").group.name == "G1"


def test_dry_run_writes_nothing(session, course, engine):
    before = snapshot(engine)
    plan = import_roster(
        session, course.course_id, roster("p2600001;A;B;;G9"), mode="sync", dry_run=True
    )
    assert len(plan.additions) == 1 and len(plan.removals) == 4
    session.rollback()
    assert snapshot(engine) == before


def test_failure_during_apply_leaves_the_database_unchanged(session, course, engine, monkeypatch):
    before = snapshot(engine)
    data = roster("p2600001;A;B;;G9", "p2500001;L;A;new@x.fr;G2")
    plan = plan_roster(session, course, parse_roster(data), mode="sync")
    assert len(plan.additions) == len(plan.updates) == 1 and len(plan.removals) == 3
    written = []

    def fail_midway(person, row):
        # The addition (and the new group) are already in the transaction: they must vanish too.
        written.append(session.scalar(select(Person.username).where(Person.username == "p2600001")))
        raise RuntimeError("disk full")

    monkeypatch.setattr(roster_apply, "_set_fields", fail_midway)
    with pytest.raises(RuntimeError, match="disk full"):
        apply_roster(session, plan)
    assert written == ["p2600001"]
    assert snapshot(engine) == before
    with pytest.raises(NotFoundError, match="no group"):
        courses.get_group(courses.get_course(session, "mlmeca-2025"), "G9")


def test_database_error_during_apply_rolls_back(session, course, engine):
    rows = parse_roster(roster("p2600001;A;B;;", "p2600002;C;D;;"))
    plan = plan_roster(session, course, rows)
    before = snapshot(engine)
    # Another session takes the second student number meanwhile: the insert breaks a unique rule.
    with session_factory(engine)() as other:
        other.add(Person(username="someone", student_number="p2600002"))
        other.commit()
    with pytest.raises(ConflictError, match=r"nothing written: .*(?i:unique|duplicate)"):
        apply_roster(session, plan)
    after_persons, after_members = snapshot(engine)
    assert after_members == before[1]
    assert [p[0] for p in after_persons] == sorted([p[0] for p in before[0]] + ["someone"])


def test_stale_plan_is_refused(session, course):
    plan = plan_roster(session, course, parse_roster(roster("p2600001;A;B;;")))
    catalog_members.add_member(session, course, "p2600001")
    session.commit()
    with pytest.raises(ConflictError, match="changed since the preview"):
        apply_roster(session, plan)


@pytest.mark.parametrize("mode", ["add", "sync"])
def test_a_student_promoted_to_lead_after_the_preview_is_neither_updated_nor_removed(
    session, course, engine, mode
):
    """A sync removes absent students and an add updates listed ones; one made lead (or
    teacher) between the preview and the apply is the team's now, and the plan is stale."""
    data = roster("p2500001;Lefèvre;Anaïs;;G2", "p2500002;Ølsen;Björn;;G1")
    plan = plan_roster(session, course, parse_roster(data), mode=mode)
    assert [m.username for m in plan.removals] == (
        ["p2500003", "p2500004"] if mode == "sync" else []
    )
    promoted = "p2500004" if mode == "sync" else "p2500001"
    catalog_members.add_member(session, course, promoted, Role.LEAD)
    session.commit()
    before = snapshot(engine)
    with pytest.raises(ConflictError, match=f"changed since the preview \\({promoted}\\)"):
        apply_roster(session, plan)
    assert snapshot(engine) == before
    assert catalog_members.role_in(session, promoted, course) == Role.LEAD


def test_team_member_in_roster_is_an_error(session, course):
    with pytest.raises(
        RosterError, match="row 3: tdupont is a teacher of mlmeca-2025, not a student"
    ):
        import_roster(session, course.course_id, roster("p2600001;A;B;;", "tdupont;Dupont;T;;"))


def test_student_number_of_another_user_is_an_error(session, course):
    data = roster("p2500001;Lefèvre;Anaïs;other@etu.example.fr;G1")
    with pytest.raises(
        RosterError, match="row 2: student number p2500001 belongs to user p2500001"
    ):
        import_roster(session, course.course_id, data, username_rule="email-local")


def test_all_plan_problems_are_reported_together(session, course):
    data = roster("p2600001;A;B;;TD 1!", "tdupont;Dupont;T;;G1", "p2600002;C;D;;G1")
    with pytest.raises(RosterError) as info:
        import_roster(session, course.course_id, data)
    assert info.value.problems[0].startswith("row 2: group name 'TD 1!' must be")
    assert info.value.problems[1:] == ["row 3: tdupont is a teacher of mlmeca-2025, not a student"]
    with pytest.raises(ValidationError, match="group name 'G 1'"):
        import_roster(session, course.course_id, roster("p2600002;C;D;;"), group="G 1")


def test_cp1252_comma_roster_round_trip(session, course):
    data = "Student number,Last name,First name\r\n2600001,Hervé,Gaëlle\r\n".encode("cp1252")
    import_roster(session, course.course_id, data)
    session.expire_all()
    assert people.get_person(session, "2600001").last_name == "Hervé"


def test_hundreds_of_rows(session, course):
    # More usernames than one IN (...) query takes (coursehub.catalog.roster.plan._CHUNK).
    lines = [f"P26{i:05d};Nom{i};Prénom{i};e{i}@etu.example.fr;G{i % 3 + 1}" for i in range(700)]
    plan = import_roster(session, course.course_id, roster(*lines))
    assert len(plan.additions) == 700 and plan.new_groups == ["G3"]
    query = select(func.count()).select_from(Membership).where(Membership.course_pk == course.id)
    assert session.scalar(query) == 700 + len(DEMO_MEMBERS)
    assert import_roster(session, course.course_id, roster(*lines)).unchanged == 700


def test_plan_changes_is_pure():
    rows = [
        RosterRow(2, "a", "a", "A", "Ann", None, "G1"),
        RosterRow(3, "b", "b", "B", "Bob", None, None),
    ]
    state = {
        "a": MemberState("a", "a", "A", "Ann", None, "student", "G2"),
        "c": MemberState("c", "c", "C", "Cy", None, "student", "G1"),
        "t": MemberState("t", None, "T", "Tom", None, "teacher", None),
    }
    plan = plan_changes("x-2025", rows, state, {"a": "a"}, ["G1", "G2"], mode="sync")
    assert [(u.row.username, u.fields) for u in plan.updates] == [("a", ("group",))]
    assert [r.username for r in plan.additions] == ["b"]
    assert [m.username for m in plan.removals] == ["c"]
    text = render_plan(plan)
    assert text.splitlines()[:2] == [
        "course x-2025, mode sync",
        "1 to add, 1 to update, 1 to remove, 0 unchanged",
    ]
    assert "~ row 2: a Ann A [G1] (group)" in text and "- c Cy C" in text


def test_cli_roster_import(database_url, tmp_path, capsys):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    path = tmp_path / "roster.csv"
    path.write_bytes(roster("p2600001;Hervé;Gaëlle;;G1", encoding="cp1252"))
    args = ["roster", "import", "mlmeca-2025", str(path), "--database-url", database_url]
    assert main([*args, "--dry-run", "--mode", "sync"]) == 0
    out = capsys.readouterr().out
    assert "1 to add, 0 to update, 4 to remove" in out and "dry run: nothing written" in out
    assert main(args) == 0
    assert "+ row 2: p2600001 Gaëlle Hervé [G1]" in capsys.readouterr().out
    path.write_bytes(roster("p2600002;X;Y;bad-mail;G1", "p2600002;X;Y;;G1"))
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"coursehub: error: roster {path}: row 2, column D (Courriel): "
        "'bad-mail' is not an e-mail address; "
        "row 3: student p2600002 is listed twice (rows 2 and 3)\n"
    )
    assert main([*args[:3], str(tmp_path / "missing.csv"), *args[4:]]) == 2
    assert "cannot read roster" in capsys.readouterr().err


# control characters and database errors: same message on SQLite and PostgreSQL, no personal data --


def test_a_nul_byte_is_refused_before_the_database_with_the_same_message_everywhere(
    session, course, engine
):
    before = snapshot(engine)
    lines = [f"p26{i:05d};Nom{i};Prénom;p26{i:05d}@example.org;G1" for i in range(200)]
    data = roster(*lines, "p2699999;Mar\x00tin;Léa;lea@example.org;G1")
    with pytest.raises(RosterError) as info:
        import_roster(session, course.course_id, data)
    assert str(info.value) == (
        "roster: row 202, column B (Nom): contains a control character (U+0000)"
    )
    assert snapshot(engine) == before


def test_a_value_the_database_refuses_is_a_message_without_any_value(session, course, engine):
    # Rows made by hand skip parse_roster's checks: what reaches the database is refused by
    # PostgreSQL (NUL) and SQLite (the student number of another person), never with a value.
    bad = RosterRow(2, "p2600001", "p2500002", "Mar\x00tin", "Léa", "lea@example.org", None)
    plan = RosterPlan(course.course_id, "add", None, additions=[bad])
    before = snapshot(engine)
    with pytest.raises((ConflictError, RosterError)) as info:
        apply_roster(session, plan)
    message = str(info.value)
    assert "nothing written" in message
    for secret in ("Mar", "Léa", "lea@", "p2500002", "p2600001"):
        assert secret not in message
    assert snapshot(engine) == before


# identity: shown old -> new, confirmed, and kept for people of other courses ------------------


@pytest.fixture
def two_courses(session, course):
    """mlmeca-2025 (seeded, Chloé Moreau p2500003 a student) and numflu-2025, empty."""
    other = courses.create_course(session, "NUMFLU", "Numerical fluids", course.year, course.portal)
    session.commit()
    return course, other


CROSS = roster("p2500003;Moreau-Durand;Chloé;c.moreau@other.example.org;G1")


def test_a_teacher_importing_a_student_of_another_course_keeps_their_identity(session, two_courses):
    _, numflu = two_courses
    plan = plan_roster(session, numflu, parse_roster(CROSS))
    (change,) = plan.identity_changes
    assert (change.row, change.username, change.applied) == (2, "p2500003", False)
    assert change.changes == (
        ("last_name", None, "Moreau-Durand"),
        ("email", None, "c.moreau@other.example.org"),
    )
    assert not change.old_shown
    assert not plan.needs_confirmation
    text = render_plan(plan)
    assert (
        "! row 2: p2500003 last_name (not shown) -> 'Moreau-Durand', "
        "email (not shown) -> 'c.moreau@other.example.org' (not applied: "
    ) in text
    assert "Moreau'" not in text and "chloé.moreau" not in text  # mlmeca's data, not numflu's
    apply_roster(session, plan)
    person = people.get_person(session, "p2500003")
    assert (person.last_name, person.email) == ("Moreau", "chloé.moreau@etu.example.org")
    assert catalog_members.role_in(session, "p2500003", numflu) == Role.STUDENT


def test_an_admin_import_renames_only_once_confirmed(session, two_courses, engine):
    _, numflu = two_courses
    before = snapshot(engine)
    with pytest.raises(ConflictError, match="changes the name, e-mail or student number of 1"):
        import_roster(session, numflu.course_id, CROSS, admin=True)
    assert snapshot(engine) == before
    plan = import_roster(session, numflu.course_id, CROSS, admin=True, confirm=True)
    assert plan.identity_changes[0].applied
    session.expire_all()
    assert people.get_person(session, "p2500003").last_name == "Moreau-Durand"


def test_a_teacher_may_rename_a_student_who_is_only_in_their_course(session, course):
    data = roster("p2500001;Lefèvre-Roux;Anaïs;;G1")
    plan = plan_roster(session, course, parse_roster(data))
    assert [(c.changes, c.applied) for c in plan.identity_changes] == [
        ((("last_name", "Lefèvre", "Lefèvre-Roux"),), True)
    ]
    assert "~ row 2: p2500001 last_name 'Lefèvre' -> 'Lefèvre-Roux'" in render_plan(plan)
    assert plan.needs_confirmation


def test_a_student_also_in_another_course_keeps_their_identity_in_an_update(session, two_courses):
    mlmeca, numflu = two_courses
    catalog_members.add_member(session, numflu, "p2500001")
    session.commit()
    plan = plan_roster(session, mlmeca, parse_roster(roster("p2500001;Roux;Anaïs;;G2")))
    assert [(u.row.username, u.fields) for u in plan.updates] == [("p2500001", ("group",))]
    assert [c.applied for c in plan.identity_changes] == [False]
    # their own student: the stored value is shown, the change is not applied
    assert plan.identity_changes[0].changes == (("last_name", "Lefèvre", "Roux"),)
    apply_roster(session, plan)
    assert people.get_person(session, "p2500001").last_name == "Lefèvre"


def test_cli_dry_run_shows_the_rename_and_applying_it_needs_yes(database_url, tmp_path, capsys):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    path = tmp_path / "cross.csv"
    path.write_bytes(CROSS)
    args = ["roster", "import", "mlmeca-2025", str(path), "--database-url", database_url]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "~ row 2: p2500003 last_name 'Moreau' -> 'Moreau-Durand', email " in out
    assert "dry run: nothing written" in out
    assert main(args) == 2
    assert "re-run with --yes" in capsys.readouterr().err
    assert main([*args, "--yes"]) == 0
    assert capsys.readouterr().out.endswith("applied\n")


def test_cli_binary_roster_is_one_short_line_naming_the_file(database_url, tmp_path, capsys):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    path = tmp_path / "export.csv"
    path.write_bytes(bytes(range(0x80, 0x100)) * 24)
    assert main(["roster", "import", "mlmeca-2025", str(path), "--database-url", database_url]) == 2
    assert capsys.readouterr().err == (
        f"coursehub: error: roster {path}: the file is not a CSV text file "
        "(binary data; an Excel file? save it as CSV)\n"
    )
