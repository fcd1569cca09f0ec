"""Exams: what the proctor sees and does, and what a student's browser reports.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04

See :mod:`coursehub.catalog.models.exams`:

* ``exams.allowed_networks`` (the address ranges students may sign in from
  during the exam; NULL: anywhere) and ``exams.release_at`` (when scores and
  feedback are released; NULL: by hand), nullable;
* ``exam_sessions``: ``ended_at``/``ended_by`` (a proctor ended the student's
  time: the bell submits their work), ``last_saved_at``/``last_saved_sha256``
  (the latest autosave of their exam home), nullable;
* ``exam_code_failures``: wrong start codes per student and exam (rate limit);
* ``exam_events``: what happened during a sitting (left full screen, left the
  tab, signed in from outside the allowed ranges...), with its time.

Columns are added in place (``ALTER TABLE ... ADD COLUMN``, on SQLite too,
sqlite.org/lang_altertable.html): a batch rebuild of ``exams`` would delete
every sitting through ``ON DELETE CASCADE``. Every existing row keeps its
meaning: NULL is "not set".
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def _columns() -> list[tuple[str, sa.Column[object]]]:
    """The ``(table, column)`` pairs this revision adds, nullable."""
    when = sa.DateTime(timezone=True)
    return [
        ("exams", sa.Column("allowed_networks", sa.Text(), nullable=True)),
        ("exams", sa.Column("release_at", when, nullable=True)),
        ("exam_sessions", sa.Column("ended_at", when, nullable=True)),
        ("exam_sessions", sa.Column("ended_by", sa.String(length=128), nullable=True)),
        ("exam_sessions", sa.Column("last_saved_at", when, nullable=True)),
        ("exam_sessions", sa.Column("last_saved_sha256", sa.String(length=64), nullable=True)),
    ]


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        [f"{target}.id"],
        name=op.f(f"fk_{table}_{column}_{target}"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    when = sa.DateTime(timezone=True)
    for table, column in _columns():
        op.add_column(table, column)
    op.create_table(
        "exam_code_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("exam_pk", sa.Integer(), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failed_at", when, nullable=False),
        _fk("exam_code_failures", "exam_pk", "exams"),
        _fk("exam_code_failures", "person_pk", "people"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exam_code_failures")),
        sa.UniqueConstraint(
            "exam_pk", "person_pk", name=op.f("uq_exam_code_failures_exam_pk_person_pk")
        ),
    )
    op.create_table(
        "exam_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("exam_pk", sa.Integer(), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=False),
        sa.Column("at", when, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.String(length=255), nullable=False),
        _fk("exam_events", "exam_pk", "exams"),
        _fk("exam_events", "person_pk", "people"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exam_events")),
    )
    op.create_index(
        op.f("ix_exam_events_exam_pk_person_pk"),
        "exam_events",
        ["exam_pk", "person_pk"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_exam_events_exam_pk_person_pk"), table_name="exam_events")
    op.drop_table("exam_events")
    op.drop_table("exam_code_failures")
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table, column in reversed(_columns()):
        if sqlite:  # DROP COLUMN in place (SQLite 3.35+): no rebuild, the sittings stay
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column.name}")
        else:
            op.drop_column(table, column.name)
