"""A small, deterministic catalog for tests and the demo.

:func:`seed_demo` creates one active year, the mechanics portal, two
resource profiles and the course unit of the JCAD 2024 talk (an LSTM
forecast of a double pendulum) with a teaching team, two TD groups and a
handful of students. It flushes, never commits.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from coursehub.catalog.courses import (
    add_group,
    create_course,
    create_portal,
    create_year,
    set_material,
)
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import Course, Role
from coursehub.catalog.profiles import create_profile

#: (username, first name, last name, role, group) of the demo course's members.
DEMO_MEMBERS: tuple[tuple[str, str, str, Role, str | None], ...] = (
    ("mbuffat", "Marc", "Buffat", Role.LEAD, None),
    ("tdupont", "Thérèse", "Dupont", Role.TEACHER, None),
    ("gmartin", "Gaël", "Martin", Role.GRADER, None),
    ("p2500001", "Anaïs", "Lefèvre", Role.STUDENT, "G1"),
    ("p2500002", "Björn", "Ølsen", Role.STUDENT, "G1"),
    ("p2500003", "Chloé", "Moreau", Role.STUDENT, "G2"),
    ("p2500004", "Dimitri", "N'Diaye", Role.STUDENT, "G2"),
)


def seed_demo(session: Session, year_label: str = "2025-2026") -> Course:
    """Create the demo catalog and return its course (``course_id`` ``"mlmeca-<year>"``).

    Raises :class:`coursehub.catalog.errors.ConflictError` if the year
    already exists (seed an empty database).
    """
    year = create_year(session, year_label)
    portal = create_portal(session, "MECA", "Mécanique")
    create_profile(session, "small", cpu_limit=1, mem_limit="2G")
    profile = create_profile(
        session, "gpu-lstm", cpu_limit=2, mem_limit="4G", gpus=1, jobs_per_gpu=4
    )
    course = create_course(
        session,
        "MLMECA",
        "Machine learning for mechanics",
        year,
        portal,
        description="LSTM prediction of a chaotic double pendulum.",
        profile=profile,
    )
    groups = {name: add_group(session, course, name, "TD") for name in ("G1", "G2")}
    set_material(session, course, "https://gitlab.example.org/meca/mlmeca.git", "main", "notebooks")
    for username, first, last, role, group in DEMO_MEMBERS:
        number = username if role == Role.STUDENT else None
        email = f"{first.lower()}.{last.lower()}@etu.example.org".replace("'", "")
        add_member(
            session,
            course,
            username,
            role,
            groups.get(group or ""),
            first_name=first,
            last_name=last,
            email=email,
            student_number=number,
        )
    return course
