"""The catalog's core tables: years, portals, profiles, courses, groups, people, memberships.

These tables reference one another both ways (``Course.memberships`` and
``Membership.course``, ``Portal.managers``...), so they live in one module:
SQLAlchemy resolves a relationship's target by name when mappers are
configured, and every class of the graph is then registered.

- Collections that may hold thousands of rows (a course's, a person's and a
  group's memberships) are write-only (SQLAlchemy's "Working with Large
  Collections"): they are never loaded; read them with an explicit
  ``select`` (:mod:`coursehub.catalog.readmodel` for a course). Their rows
  go with their parent by the foreign keys' ``ON DELETE`` rules.

Conventions (keys, constraint names, UTC times, enum columns):
:mod:`coursehub.catalog.models.base`.
"""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, WriteOnlyMapped, mapped_column, relationship

from coursehub.catalog.models.base import Base, TimestampMixin, UTCDateTime, check_in, enum_column


class Role(enum.StrEnum):
    """A person's role in a course. ``lead``, ``teacher`` and ``grader`` form the teaching team."""

    LEAD = "lead"
    TEACHER = "teacher"
    GRADER = "grader"
    STUDENT = "student"


#: Roles whose members join the hub group ``formgrade-{course_id}``.
TEAM_ROLES: frozenset[Role] = frozenset({Role.LEAD, Role.TEACHER, Role.GRADER})


class GroupKind(enum.StrEnum):
    """A course sub-group: tutorial (TD, travaux dirigés) or lab (TP, travaux pratiques)."""

    TD = "TD"
    TP = "TP"


class AcademicYear(Base):
    """An academic year, e.g. ``label="2025-2026"``, ``start_year=2025``.

    ``is_active`` false means archived: the year's courses are read-only and
    the hub sync leaves them out (a pruning sync removes their groups).
    ``is_current`` marks the year new courses go to by default (at most one,
    kept so by :func:`coursehub.catalog.admin.set_current_year`).
    """

    __tablename__ = "academic_years"

    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str] = mapped_column(String(9), unique=True)
    start_year: Mapped[int] = mapped_column(Integer, unique=True)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    is_current: Mapped[bool] = mapped_column(Boolean, default=False)

    courses: Mapped[list[Course]] = relationship(back_populates="year")

    @property
    def archived(self) -> bool:
        """Whether the year is archived (not active)."""
        return not self.is_active

    def __repr__(self) -> str:
        return f"AcademicYear({self.label!r})"


class Portal(Base):
    """A discipline portal: ``code`` (e.g. ``"MECA"``) and ``name`` (e.g. ``"Mécanique"``).

    ``home_quota``: bytes a student of the portal's courses may keep in their
    home, for a course without its own (None: the department's default,
    :mod:`coursehub.homequota.plan`).
    """

    __tablename__ = "portals"

    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    home_quota: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    courses: Mapped[list[Course]] = relationship(back_populates="portal")
    managers: Mapped[list[Person]] = relationship(
        secondary="portal_managers", order_by="Person.username", viewonly=True
    )

    def __repr__(self) -> str:
        return f"Portal({self.code!r})"


class PortalManager(Base):
    """A manager of a portal: creates and archives its courses and names their leads."""

    __tablename__ = "portal_managers"
    __table_args__ = (UniqueConstraint("portal_pk", "person_pk"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    portal_pk: Mapped[int] = mapped_column(ForeignKey("portals.id", ondelete="CASCADE"))
    person_pk: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"), index=True)


class ResourceProfile(Base):
    """Per-user limits applied to a course's students on the hub.

    ``cpu_limit`` in CPUs (may be fractional), ``mem_limit`` in bytes,
    ``n_threads`` threads per process (default ``floor(cpu_limit)``, see
    :func:`coursehub.resources.threads.threads_for_cpu_limit`), ``gpus`` GPUs per user
    and ``jobs_per_gpu`` concurrent runner jobs sharing one GPU; ``partition``,
    ``account`` and ``qos`` place its Slurm jobs (NULL: the cluster's default);
    ``gpu_mem_limit`` is the GPU memory budget of one runner job in bytes
    (NULL: an equal share of the GPU).
    """

    __tablename__ = "resource_profiles"
    __table_args__ = (
        CheckConstraint("cpu_limit > 0", name="cpu_limit_positive"),
        CheckConstraint("mem_limit > 0", name="mem_limit_positive"),
        CheckConstraint("n_threads >= 1", name="n_threads_positive"),
        CheckConstraint("gpus >= 0", name="gpus_non_negative"),
        CheckConstraint("jobs_per_gpu >= 1", name="jobs_per_gpu_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    cpu_limit: Mapped[float] = mapped_column(Float)
    mem_limit: Mapped[int] = mapped_column(BigInteger)
    n_threads: Mapped[int] = mapped_column(Integer)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    jobs_per_gpu: Mapped[int] = mapped_column(Integer, default=1)
    partition: Mapped[str | None] = mapped_column(String(64), nullable=True)
    account: Mapped[str | None] = mapped_column(String(64), nullable=True)
    qos: Mapped[str | None] = mapped_column(String(64), nullable=True)
    gpu_mem_limit: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    courses: Mapped[list[Course]] = relationship(
        back_populates="profile", foreign_keys="Course.profile_pk"
    )
    #: The courses whose teaching team uses this profile (``Course.team_profile``).
    team_courses: Mapped[list[Course]] = relationship(
        foreign_keys="Course.team_profile_pk", viewonly=True
    )

    def __repr__(self) -> str:
        return f"ResourceProfile({self.name!r})"


class Course(TimestampMixin, Base):
    """A course unit (UE) in one academic year.

    ``code`` is the APOGEE-style UE code (e.g. ``"MLMECA"``); ``course_id`` is
    nbgrader's identifier, unique, derived from the code and the year
    (:func:`coursehub.catalog.courses.make_course_id`). ``last_sync_at`` and
    ``last_sync_status`` record the last hub synchronisation (None before the
    first). ``copied_from_pk``: the course it was rolled over from, if any.
    ``home_quota``: bytes each student may keep in their home (None: the
    portal's, else the department's default; :mod:`coursehub.homequota.plan`).
    ``profile`` is the students' resource profile (hub group ``nbgrader-{course_id}``),
    ``team_profile`` the teaching team's (``formgrade-{course_id}``); a course without
    a team profile gives its team the students' one (:func:`team_profile_of`).
    ``budget_cpu_hours`` / ``budget_gpu_hours``: the weekly compute budget of each
    student (None: no limit; :mod:`coursehub.meter.budget`, overrides per student in
    :class:`coursehub.catalog.models.budgets.BudgetOverride`).
    """

    __tablename__ = "courses"
    __table_args__ = (UniqueConstraint("code", "year_pk"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(32))
    title: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    course_id: Mapped[str] = mapped_column(String(64), unique=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    year_pk: Mapped[int] = mapped_column(ForeignKey("academic_years.id"), index=True)
    portal_pk: Mapped[int] = mapped_column(ForeignKey("portals.id"), index=True)
    profile_pk: Mapped[int | None] = mapped_column(ForeignKey("resource_profiles.id"))
    team_profile_pk: Mapped[int | None] = mapped_column(ForeignKey("resource_profiles.id"))
    last_sync_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_sync_status: Mapped[str | None] = mapped_column(String(200))
    copied_from_pk: Mapped[int | None] = mapped_column(
        ForeignKey("courses.id", ondelete="SET NULL")
    )
    home_quota: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    budget_cpu_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    budget_gpu_hours: Mapped[float | None] = mapped_column(Float, nullable=True)

    year: Mapped[AcademicYear] = relationship(back_populates="courses")
    portal: Mapped[Portal] = relationship(back_populates="courses")
    profile: Mapped[ResourceProfile | None] = relationship(
        back_populates="courses", foreign_keys=[profile_pk]
    )
    team_profile: Mapped[ResourceProfile | None] = relationship(foreign_keys=[team_profile_pk])
    groups: Mapped[list[CourseGroup]] = relationship(
        back_populates="course", cascade="all, delete-orphan", order_by="CourseGroup.name"
    )
    memberships: WriteOnlyMapped[Membership] = relationship(
        back_populates="course", cascade="all, delete-orphan", passive_deletes=True
    )
    material: Mapped[CourseMaterial | None] = relationship(
        back_populates="course", cascade="all, delete-orphan"
    )

    def __repr__(self) -> str:
        return f"Course({self.course_id!r})"


def team_profile_of(course: Course) -> ResourceProfile | None:
    """Return the profile of the course's teaching team: its own, else the students' (or None)."""
    return course.team_profile if course.team_profile is not None else course.profile


class CourseGroup(Base):
    """A TD or TP sub-group of a course, e.g. ``name="G1"``, ``kind="TD"``."""

    __tablename__ = "course_groups"
    __table_args__ = (
        UniqueConstraint("course_pk", "name"),
        CheckConstraint(check_in("kind", GroupKind), name="kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    course_pk: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(32))
    kind: Mapped[GroupKind] = mapped_column(enum_column(GroupKind, 2), default=GroupKind.TD)

    course: Mapped[Course] = relationship(back_populates="groups")
    memberships: WriteOnlyMapped[Membership] = relationship(
        back_populates="group", passive_deletes=True
    )

    def __repr__(self) -> str:
        return f"CourseGroup({self.name!r}, {self.kind!r})"


class Person(TimestampMixin, Base):
    """A person as the hub knows them: ``username`` is already normalised (lower case, stripped)."""

    __tablename__ = "people"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(128), unique=True)
    first_name: Mapped[str] = mapped_column(String(200), default="")
    last_name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str | None] = mapped_column(String(320))
    student_number: Mapped[str | None] = mapped_column(String(32), unique=True)

    memberships: WriteOnlyMapped[Membership] = relationship(
        back_populates="person", cascade="all, delete-orphan", passive_deletes=True
    )

    @property
    def display_name(self) -> str:
        """``"First LAST"``, or the username when no name is known."""
        name = f"{self.first_name} {self.last_name}".strip()
        return name or self.username

    def __repr__(self) -> str:
        return f"Person({self.username!r})"


class Membership(Base):
    """A person's role in a course, with an optional sub-group; one per person and course."""

    __tablename__ = "memberships"
    __table_args__ = (
        UniqueConstraint("person_pk", "course_pk"),
        CheckConstraint(check_in("role", Role), name="role"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    person_pk: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"))
    course_pk: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    role: Mapped[Role] = mapped_column(enum_column(Role, 16))
    group_pk: Mapped[int | None] = mapped_column(
        ForeignKey("course_groups.id", ondelete="SET NULL")
    )

    person: Mapped[Person] = relationship(back_populates="memberships")
    course: Mapped[Course] = relationship(back_populates="memberships")
    group: Mapped[CourseGroup | None] = relationship(back_populates="memberships")

    def __repr__(self) -> str:
        return f"Membership({self.person_pk}, {self.course_pk}, {self.role!r})"


class CourseMaterial(Base):
    """Where a course's notebooks live: a git repository, a branch and a sub-path in it."""

    __tablename__ = "course_materials"

    id: Mapped[int] = mapped_column(primary_key=True)
    course_pk: Mapped[int] = mapped_column(
        ForeignKey("courses.id", ondelete="CASCADE"), unique=True
    )
    git_url: Mapped[str] = mapped_column(String(500))
    branch: Mapped[str] = mapped_column(String(200), default="main")
    subpath: Mapped[str] = mapped_column(String(500), default="")
    # the mirror's state (coursehub.catalog.material); the credential itself is a private file
    credential: Mapped[str] = mapped_column(String(16), default="")
    state: Mapped[str] = mapped_column(String(16), default="new")
    commit: Mapped[str] = mapped_column(String(64), default="")
    source: Mapped[str] = mapped_column(String(1300), default="")
    pull_url: Mapped[str] = mapped_column(String(1000), default="")
    error: Mapped[str] = mapped_column(Text, default="")
    requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_update_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    course: Mapped[Course] = relationship(back_populates="material")

    def __repr__(self) -> str:
        return f"CourseMaterial({self.git_url!r})"
