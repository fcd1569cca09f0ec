"""Exams: an nbgrader assignment sat in a timed session (migration ``0013``).

``exams``
    One row per exam of a course: the nbgrader assignment it is
    (``assignment``, unique in the course), when it opens, its duration in
    minutes, its hard end (UTC), the zone its times are shown in, the
    SHA-256 of its start code (None: no code), who created it and when, and
    the top-level modules its exam kernels may import (``allowed_imports``,
    comma-separated; None: no list, migration ``0014``), the address ranges
    students may sign in from (``allowed_networks``, comma-separated CIDR;
    None: anywhere) and when scores and feedback are released
    (``release_at``; None: by hand), migration ``0015``; the exam clock's
    settings, migration ``0017`` (:mod:`coursehub.catalog.examsettings`):
    minutes before the end when it warns (``warn_before_min``, default 5;
    0: no warning) and whether full screen is ``offered`` or ``required``
    (``fullscreen``).
``exam_overrides``
    Extra time for one student (``person_pk``) or one group (``group_pk``),
    exactly one of the two: minutes, percent of the duration, and
    optionally another window (``opens_at``/``hard_end``, a conflict slot).
``exam_sessions``
    One row per student who started: when (``started_at``, recorded by the
    server when they start, so their time survives a closed browser, a
    crashed server or another computer), minutes a proctor added live, and
    the receipt of their last submission: when, the submitted folder's name
    in the exchange, its SHA-256 and the per-file digests (JSON); ``final``
    once the bell submitted it. From migration ``0015``: ``ended_at`` and
    ``ended_by`` when a proctor ended the student's time (the bell then
    submits their work), and the latest autosave of their exam home
    (``last_saved_at``, the SHA-256 of its file list).
``exam_code_failures``
    Wrong start codes of one student for one exam: how many since the last
    pause, and when the last one was (migration ``0015``).
``exam_events``
    What happened during a sitting, with its time (migration ``0015``):
    ``kind`` (``fullscreen-exit``, ``tab-hidden``, ``sign-in-outside``...)
    and a one-line ``detail``.

Every row goes with its exam, and an exam with its course (``ON DELETE
CASCADE``). The timing rules: :mod:`coursehub.catalog.examtime`; reading and
writing: :mod:`coursehub.catalog.exams`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from coursehub.catalog.models.base import Base, UTCDateTime


class Exam(Base):
    """An nbgrader assignment of a course sat as a timed exam."""

    __tablename__ = "exams"
    __table_args__ = (
        UniqueConstraint("course_pk", "assignment"),
        CheckConstraint("duration_min > 0", name="duration_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    course_pk: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    assignment: Mapped[str] = mapped_column(String(64))
    opens_at: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_min: Mapped[int] = mapped_column(Integer)
    hard_end: Mapped[datetime] = mapped_column(UTCDateTime())
    timezone: Mapped[str] = mapped_column(String(64))
    start_code_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    allowed_imports: Mapped[str | None] = mapped_column(Text, nullable=True)
    allowed_networks: Mapped[str | None] = mapped_column(Text, nullable=True)
    release_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    warn_before_min: Mapped[int] = mapped_column(Integer, default=5, server_default="5")
    fullscreen: Mapped[str] = mapped_column(String(16), default="offered", server_default="offered")


class ExamOverride(Base):
    """Extra time (and maybe another window) for one student or one group of an exam."""

    __tablename__ = "exam_overrides"
    __table_args__ = (
        UniqueConstraint("exam_pk", "person_pk"),
        UniqueConstraint("exam_pk", "group_pk"),
        CheckConstraint("(person_pk IS NULL) <> (group_pk IS NULL)", name="one_target"),
        CheckConstraint("extra_minutes >= 0", name="extra_minutes_non_negative"),
        CheckConstraint("extra_percent >= 0", name="extra_percent_non_negative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    exam_pk: Mapped[int] = mapped_column(ForeignKey("exams.id", ondelete="CASCADE"))
    person_pk: Mapped[int | None] = mapped_column(
        ForeignKey("people.id", ondelete="CASCADE"), nullable=True, index=True
    )
    group_pk: Mapped[int | None] = mapped_column(
        ForeignKey("course_groups.id", ondelete="CASCADE"), nullable=True
    )
    extra_minutes: Mapped[int] = mapped_column(Integer, default=0)
    extra_percent: Mapped[int] = mapped_column(Integer, default=0)
    opens_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    hard_end: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    set_by: Mapped[str] = mapped_column(String(128))
    set_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ExamSession(Base):
    """One student's sitting of an exam: start, time added live, last submission's receipt."""

    __tablename__ = "exam_sessions"
    __table_args__ = (
        UniqueConstraint("exam_pk", "person_pk"),
        CheckConstraint("added_minutes >= 0", name="added_minutes_non_negative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    exam_pk: Mapped[int] = mapped_column(ForeignKey("exams.id", ondelete="CASCADE"))
    person_pk: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"), index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    added_minutes: Mapped[int] = mapped_column(Integer, default=0)
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    submission: Mapped[str | None] = mapped_column(String(255), nullable=True)
    receipt_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    receipt_files: Mapped[str | None] = mapped_column(Text, nullable=True)
    final: Mapped[bool] = mapped_column(Boolean, default=False)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    ended_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    last_saved_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_saved_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)


class ExamCodeFailure(Base):
    """Wrong start codes of one student for one exam (the start's rate limit)."""

    __tablename__ = "exam_code_failures"
    __table_args__ = (UniqueConstraint("exam_pk", "person_pk"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    exam_pk: Mapped[int] = mapped_column(ForeignKey("exams.id", ondelete="CASCADE"))
    person_pk: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"))
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_failed_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ExamEvent(Base):
    """Something that happened during a student's sitting, as their browser or the hub saw it."""

    __tablename__ = "exam_events"
    __table_args__ = (Index("ix_exam_events_exam_pk_person_pk", "exam_pk", "person_pk"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    exam_pk: Mapped[int] = mapped_column(ForeignKey("exams.id", ondelete="CASCADE"))
    person_pk: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    kind: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str] = mapped_column(String(255))
