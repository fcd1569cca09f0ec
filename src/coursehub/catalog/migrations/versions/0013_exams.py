"""Exams: timed sessions of an nbgrader assignment, overrides, each student's sitting.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04

Three new tables, empty (see :mod:`coursehub.catalog.models.exams`):
``exams``, ``exam_overrides`` and ``exam_sessions``. No existing table
changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        [f"{target}.id"],
        name=op.f(f"fk_{table}_{column}_{target}"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    when = sa.DateTime(timezone=True)
    op.create_table(
        "exams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("course_pk", sa.Integer(), nullable=False),
        sa.Column("assignment", sa.String(length=64), nullable=False),
        sa.Column("opens_at", when, nullable=False),
        sa.Column("duration_min", sa.Integer(), nullable=False),
        sa.Column("hard_end", when, nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("start_code_sha256", sa.String(length=64), nullable=True),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.CheckConstraint("duration_min > 0", name=op.f("ck_exams_duration_positive")),
        _fk("exams", "course_pk", "courses"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exams")),
        sa.UniqueConstraint("course_pk", "assignment", name=op.f("uq_exams_course_pk_assignment")),
    )
    op.create_table(
        "exam_overrides",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("exam_pk", sa.Integer(), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=True),
        sa.Column("group_pk", sa.Integer(), nullable=True),
        sa.Column("extra_minutes", sa.Integer(), nullable=False),
        sa.Column("extra_percent", sa.Integer(), nullable=False),
        sa.Column("opens_at", when, nullable=True),
        sa.Column("hard_end", when, nullable=True),
        sa.Column("set_by", sa.String(length=128), nullable=False),
        sa.Column("set_at", when, nullable=False),
        sa.CheckConstraint(
            "(person_pk IS NULL) <> (group_pk IS NULL)", name=op.f("ck_exam_overrides_one_target")
        ),
        sa.CheckConstraint(
            "extra_minutes >= 0", name=op.f("ck_exam_overrides_extra_minutes_non_negative")
        ),
        sa.CheckConstraint(
            "extra_percent >= 0", name=op.f("ck_exam_overrides_extra_percent_non_negative")
        ),
        _fk("exam_overrides", "exam_pk", "exams"),
        _fk("exam_overrides", "group_pk", "course_groups"),
        _fk("exam_overrides", "person_pk", "people"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exam_overrides")),
        sa.UniqueConstraint("exam_pk", "group_pk", name=op.f("uq_exam_overrides_exam_pk_group_pk")),
        sa.UniqueConstraint(
            "exam_pk", "person_pk", name=op.f("uq_exam_overrides_exam_pk_person_pk")
        ),
    )
    op.create_index(
        op.f("ix_exam_overrides_person_pk"), "exam_overrides", ["person_pk"], unique=False
    )
    op.create_table(
        "exam_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("exam_pk", sa.Integer(), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=False),
        sa.Column("started_at", when, nullable=False),
        sa.Column("added_minutes", sa.Integer(), nullable=False),
        sa.Column("submitted_at", when, nullable=True),
        sa.Column("submission", sa.String(length=255), nullable=True),
        sa.Column("receipt_sha256", sa.String(length=64), nullable=True),
        sa.Column("receipt_files", sa.Text(), nullable=True),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.CheckConstraint(
            "added_minutes >= 0", name=op.f("ck_exam_sessions_added_minutes_non_negative")
        ),
        _fk("exam_sessions", "exam_pk", "exams"),
        _fk("exam_sessions", "person_pk", "people"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exam_sessions")),
        sa.UniqueConstraint(
            "exam_pk", "person_pk", name=op.f("uq_exam_sessions_exam_pk_person_pk")
        ),
    )
    op.create_index(
        op.f("ix_exam_sessions_person_pk"), "exam_sessions", ["person_pk"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_exam_sessions_person_pk"), table_name="exam_sessions")
    op.drop_table("exam_sessions")
    op.drop_index(op.f("ix_exam_overrides_person_pk"), table_name="exam_overrides")
    op.drop_table("exam_overrides")
    op.drop_table("exams")
