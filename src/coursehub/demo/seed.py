"""The demo's catalog: one year, two portals, two courses, a teaching team, 30 students.

Seeded once, on the first ``coursehub demo`` in a data directory, through the
catalog's own services (migrations, ``create_*``, and the roster import used
for real student lists); a restart finds the year and leaves everything as it
is. The course of the JCAD 2024 talk, "Machine Learning for Mechanics" (M2),
gets a 2-CPU / 4 GiB / 2-thread profile for its students and a 4-CPU / 8 GiB /
4-thread one for its teaching team.
"""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from coursehub.errors import is_storage_refused, storage_full_kind

#: Academic year of the demo catalog.
DEMO_YEAR = "2025-2026"
#: Roster file shipped in this package (semicolon separated, UTF-8).
ROSTER_FILE = "roster_mlmeca.csv"
#: Teaching notebook copied into each student's home.
NOTEBOOK_FILE = "double_pendulum.ipynb"
#: Package holding it, in ``notebooks/`` (the one copy: ``examples/pendulum/`` links to it).
NOTEBOOK_PACKAGE = "coursehub.pendulum"
#: (username, first name, last name, course code, role) of the teaching teams.
DEMO_TEAM: tuple[tuple[str, str, str, str, str], ...] = (
    ("mbuffat", "Marc", "Buffat", "MLMECA", "lead"),
    ("tdupont", "Thérèse", "Dupont", "MLMECA", "teacher"),
    ("gmartin", "Gaël", "Martin", "MLMECA", "grader"),
    ("sleclerc", "Sébastien", "Leclerc", "NUMFLU", "lead"),
)
#: (username, first name, last name) of the demo's administrator: a hub admin, hence
#: an admin of the course app (every year, portal and course).
DEMO_ADMIN: tuple[str, str, str] = ("admin", "Camille", "Roux")
#: (username, first name, last name, portal code) of the demo's portal manager.
DEMO_MANAGER: tuple[str, str, str, str] = ("lgarnier", "Lucie", "Garnier", "MECA")
#: (code, title, portal code, students' profile, team's profile or None) of the demo courses.
DEMO_COURSES: tuple[tuple[str, str, str, str, str | None], ...] = (
    ("MLMECA", "Machine Learning for Mechanics", "MECA", "m2-mlmeca", "m2-mlmeca-team"),
    ("NUMFLU", "Mécanique des fluides numérique", "MATH", "l3-small", None),
)


def roster_bytes() -> bytes:
    """Return the shipped roster of "Machine Learning for Mechanics" (30 students)."""
    return resources.files("coursehub.demo").joinpath(ROSTER_FILE).read_bytes()


def is_seeded(session: Any) -> bool:
    """Return True when the demo year is already in the catalog."""
    from sqlalchemy import select

    from coursehub.catalog.models.courses import AcademicYear

    return session.scalar(select(AcademicYear).where(AcademicYear.label == DEMO_YEAR)) is not None


def seed_catalog(session: Any) -> list[str]:
    """Create the demo catalog (flushes; the roster import commits); return the course_ids.

    Raises
    ------
    coursehub.catalog.errors.ConflictError
        If the demo year already exists (see :func:`is_seeded`).
    """
    from coursehub.catalog.courses import add_group, create_course, create_portal, create_year
    from coursehub.catalog.members import add_member
    from coursehub.catalog.profiles import create_profile
    from coursehub.catalog.roster.apply import import_roster

    year = create_year(session, DEMO_YEAR)
    portals = {
        "MECA": create_portal(session, "MECA", "Mécanique"),
        "MATH": create_portal(session, "MATH", "Mathématiques appliquées"),
    }
    profiles = {
        "m2-mlmeca": create_profile(session, "m2-mlmeca", cpu_limit=2, mem_limit="4G", n_threads=2),
        "l3-small": create_profile(session, "l3-small", cpu_limit=1, mem_limit="2G", n_threads=1),
        "m2-mlmeca-team": create_profile(session, "m2-mlmeca-team", cpu_limit=4, mem_limit="8G"),
    }
    courses = {}
    for code, title, portal, profile, team_profile in DEMO_COURSES:
        team = profiles[team_profile] if team_profile else None
        course = create_course(
            session,
            code,
            title,
            year,
            portals[portal],
            profile=profiles[profile],
            team_profile=team,
        )
        for name in ("G1", "G2"):
            add_group(session, course, name, "TD")
        courses[code] = course
    for username, first, last, code, role in DEMO_TEAM:
        add_member(session, courses[code], username, role, None, first_name=first, last_name=last)
    session.commit()
    import_roster(session, courses["MLMECA"].course_id, roster_bytes())
    return [course.course_id for course in courses.values()]


def ensure_staff(session: Any) -> None:
    """Put the demo's administrator and portal manager in the catalog (idempotent; commits).

    The administrator is a person of the catalog (a hub admin through the
    demo's hub configuration); the manager manages :data:`DEMO_MANAGER`'s portal.
    """
    from coursehub.catalog.admin import add_manager
    from coursehub.catalog.courses import get_portal
    from coursehub.catalog.people import ensure_person

    username, first, last = DEMO_ADMIN
    ensure_person(session, username, first, last)
    username, first, last, portal = DEMO_MANAGER
    ensure_person(session, username, first, last)
    add_manager(session, get_portal(session, portal), username)
    session.commit()


def ensure_current_year(session: Any) -> None:
    """Make the demo year the current one when no year is (idempotent; commits).

    Forms and the usage overview default to the current year; a demo
    catalog seeded by an older version had none.
    """
    from sqlalchemy import select

    from coursehub.catalog.admin import set_current_year
    from coursehub.catalog.courses import get_year
    from coursehub.catalog.models.courses import AcademicYear

    if session.scalar(select(AcademicYear.id).where(AcademicYear.is_current.is_(True))) is None:
        year = get_year(session, DEMO_YEAR)
        if year.is_active:
            set_current_year(session, year)
    session.commit()


def ensure_notebook(home: str | Path) -> Path | None:
    """Copy the pendulum notebook into ``home`` unless a file of that name is there.

    Returns the notebook's path in ``home``, or None when the package ships
    no notebook. The home directory is created if needed. The copy goes
    through a temporary file renamed into place, so a copy that fails half
    way (a full home) leaves no truncated notebook that would stop later
    copies.

    Raises
    ------
    OSError
        If the home cannot take the copy (``ENOSPC``, ``EDQUOT``...); nothing
        of it is left behind.
    """
    source = resources.files(NOTEBOOK_PACKAGE) / "notebooks" / NOTEBOOK_FILE
    if not source.is_file():
        return None
    target = Path(home) / NOTEBOOK_FILE
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{NOTEBOOK_FILE}.part")
        try:
            with resources.as_file(source) as path:
                shutil.copyfile(path, partial)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    return target


def copy_notebook_hook(spawner: Any) -> None:
    """The demo's ``Spawner.pre_spawn_hook``: the notebook in the home on first spawn.

    A home that can take no more (disk full, quota reached, read-only:
    :func:`coursehub.errors.is_storage_refused`) gets no copy: the hub logs
    one line and the server starts without it, so that the student can still
    open their files and delete some. Other errors stop the spawn as before.
    """
    home = spawner.home_dir
    try:
        ensure_notebook(home)
    except OSError as exc:
        if not is_storage_refused(exc):
            raise
        spawner.log.warning(
            "coursehub: %s: home %s is full (%s): %s not copied, the server starts without it",
            spawner.user.name,
            home,
            storage_full_kind(exc),
            NOTEBOOK_FILE,
        )
