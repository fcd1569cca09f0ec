"""Rollover: what a copied course keeps (team on request, sources) and never keeps (students,
grades, released files); archived years; the new course on a real hub; 0001 -> 0002 with data."""

from __future__ import annotations

import uuid

import pytest
from alembic import command
from sqlalchemy import select, text

from coursehub.admin.carry import carry_course, carry_year
from coursehub.catalog import schema
from coursehub.catalog.admin import ReadOnlyError, add_manager, archive_year, ensure_year
from coursehub.catalog.courses import create_course, create_portal, create_year, get_course
from coursehub.catalog.db import make_engine, session_factory, session_scope
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import AcademicYear, Membership, Person, Role
from coursehub.catalog.seed import seed_demo
from coursehub.grading.layout import make_layout
from coursehub.hub.hubclient import HubClient
from coursehub.hub.sync import course_specs, sync_catalog


@pytest.fixture
def layout_for(tmp_path):
    return lambda course_id: make_layout(course_id, tmp_path / "courses", tmp_path / "exchange")


def grading_files(layout_for, course_id: str) -> None:
    """A course directory as nbgrader leaves it after a year: sources, releases, grades."""
    root = layout_for(course_id).course_dir
    for relative in (
        "source/ps1/ps1.ipynb",
        "source/ps1/data.csv",
        "release/ps1/ps1.ipynb",
        "submitted/p2500001/ps1/ps1.ipynb",
        "autograded/p2500001/ps1/ps1.ipynb",
        "gradebook.db",
    ):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(relative, encoding="utf-8")


def roles_of(session, course) -> dict[str, Role]:
    rows = session.execute(
        select(Person.username, Membership.role)
        .join(Membership.person)
        .where(Membership.course_pk == course.id)
    )
    return {username: role for username, role in rows}


@pytest.mark.parametrize("with_team", [False, True])
def test_a_copy_keeps_the_course_and_on_request_the_team_but_never_students_or_grades(
    session, layout_for, with_team
):
    seed_demo(session)
    create_year(session, "2026-2027")
    session.commit()
    grading_files(layout_for, "mlmeca-2025")
    new = carry_course(
        session, "mlmeca-2025", "2026-2027", with_team=with_team, layout_for=layout_for
    )
    old = get_course(session, "mlmeca-2025")
    assert (new.course_id, new.title, new.description) == (
        "mlmeca-2026",
        old.title,
        old.description,
    )
    assert (new.portal, new.profile, new.copied_from_pk) == (old.portal, old.profile, old.id)
    assert [(g.name, g.kind) for g in new.groups] == [(g.name, g.kind) for g in old.groups]
    assert (new.material.git_url, new.material.subpath) == (old.material.git_url, "notebooks")
    team = {"mbuffat": Role.LEAD, "tdupont": Role.TEACHER, "gmartin": Role.GRADER}
    expected = team if with_team else {"mbuffat": Role.LEAD}
    assert roles_of(session, new) == expected  # no student, ever
    copied = layout_for("mlmeca-2026").course_dir
    files = sorted(str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file())
    assert files == ["source/ps1/data.csv", "source/ps1/ps1.ipynb"]  # no release, no grade


def test_a_failed_source_copy_writes_nothing(session, layout_for):
    seed_demo(session)
    create_year(session, "2026-2027")
    session.commit()
    grading_files(layout_for, "mlmeca-2025")
    (layout_for("mlmeca-2026").course_dir / "source").mkdir(parents=True)  # a leftover
    with pytest.raises(Exception, match="already exists; move it away"):
        carry_course(session, "mlmeca-2025", "2026-2027", layout_for=layout_for)
    assert session.scalar(select(text("count(*)")).select_from(text("courses"))) == 1


def test_an_archived_year_is_read_only_and_left_out_of_the_hub(session, layout_for):
    seed_demo(session)
    create_year(session, "2026-2027")
    archive_year(session, session.scalar(select(AcademicYear).filter_by(label="2025-2026")))
    session.commit()
    assert course_specs(session) == []
    with pytest.raises(ReadOnlyError, match="2025-2026 is archived"):
        carry_year(session, "2025-2026", "2026-2027", layout_for=layout_for)
    with pytest.raises(ReadOnlyError, match="2025-2026 is archived"):
        ensure_year(session, "2025-2026", current=True)


@pytest.mark.integration
def test_a_rolled_over_course_syncs_to_the_hub_and_the_archived_one_leaves_it(
    live_hub, database_url, layout_for
):
    tag = uuid.uuid4().hex[:6]
    engine = make_engine(database_url)
    client = HubClient(live_hub.api_url, live_hub.token)
    try:
        with session_scope(engine) as session:
            old_year, new_year = (
                create_year(session, "2025-2026"),
                create_year(session, "2026-2027"),
            )
            portal = create_portal(session, f"P{tag}", "Portal")
            add_manager(session, portal, f"man-{tag}")
            course = create_course(session, f"C{tag}", "Course", old_year, portal)
            add_member(session, course, f"lead-{tag}", Role.LEAD)
            add_member(session, course, f"teach-{tag}", Role.TEACHER)
            add_member(session, course, f"stud-{tag}", Role.STUDENT)
            assert new_year.label == "2026-2027"
        with session_factory(engine)() as session:
            new = carry_course(
                session, f"c{tag}-2025", "2026-2027", with_team=True, layout_for=layout_for
            )
            archive_year(session, session.scalar(select(AcademicYear).filter_by(label="2025-2026")))
            session.commit()
            assert sync_catalog(session, client, prune=True).report.ok
            session.commit()
        groups = {g["name"]: set(g["users"]) for g in client.list_groups()}
        assert groups[f"formgrade-{new.course_id}"] == {f"lead-{tag}", f"teach-{tag}"}
        assert groups[f"nbgrader-{new.course_id}"] == set()
        assert f"nbgrader-c{tag}-2025" not in groups and f"formgrade-c{tag}-2025" not in groups
    finally:
        engine.dispose()
        for group in client.list_groups():
            if tag in group["name"]:
                client.delete_group(group["name"])
        for user in client.list_users():
            if tag in user["name"]:
                client.delete_user(user["name"])


def test_migration_0002_upgrades_a_0001_catalog_with_data(blank_database_url):
    engine = make_engine(blank_database_url)
    try:
        schema.upgrade_database(engine, "0001")
        with engine.begin() as connection:
            for start, active in ((2024, False), (2025, True)):
                connection.execute(
                    text(
                        "INSERT INTO academic_years (label, start_year, is_active) "
                        "VALUES (:label, :start, :active)"
                    ),
                    {"label": f"{start}-{start + 1}", "start": start, "active": active},
                )
        schema.upgrade_database(engine)
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT label, is_current FROM academic_years ORDER BY label")
            ).all()
        assert [(label, bool(current)) for label, current in rows] == [
            ("2024-2025", False),
            ("2025-2026", True),
        ]
        schema.check_schema(engine)
        command.downgrade(schema.alembic_config(engine), "0001")
        schema.upgrade_database(engine)
        schema.check_schema(engine)
    finally:
        engine.dispose()
