"""Weekly compute budgets: per course and student, raised per student by the team.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03

Two nullable columns on ``courses``, ``budget_cpu_hours`` and
``budget_gpu_hours`` (see :class:`coursehub.catalog.models.courses.Course`):
NULL, as every course has them after this revision, is no budget, which is
what every course had before. One table, ``budget_overrides``
(:class:`coursehub.catalog.models.budgets.BudgetOverride`), empty.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

COLUMNS = ("budget_cpu_hours", "budget_gpu_hours")


def upgrade() -> None:
    # ALTER TABLE ... ADD COLUMN in place, on SQLite too (sqlite.org/lang_altertable.html):
    # a batch rebuild of courses would delete every membership (ON DELETE CASCADE)
    for name in COLUMNS:
        op.add_column("courses", sa.Column(name, sa.Float(), nullable=True))
    op.create_table(
        "budget_overrides",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("course_pk", sa.Integer(), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=False),
        sa.Column("cpu_hours", sa.Float(), nullable=True),
        sa.Column("gpu_hours", sa.Float(), nullable=True),
        sa.Column("set_by", sa.String(length=128), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["course_pk"],
            ["courses.id"],
            name=op.f("fk_budget_overrides_course_pk_courses"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["person_pk"],
            ["people.id"],
            name=op.f("fk_budget_overrides_person_pk_people"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_overrides")),
        sa.UniqueConstraint(
            "course_pk", "person_pk", name=op.f("uq_budget_overrides_course_pk_person_pk")
        ),
    )
    op.create_index(
        op.f("ix_budget_overrides_person_pk"), "budget_overrides", ["person_pk"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_budget_overrides_person_pk"), table_name="budget_overrides")
    op.drop_table("budget_overrides")
    if op.get_bind().dialect.name == "sqlite":
        # DROP COLUMN in place (SQLite 3.35+): no rebuild, the memberships stay
        for name in COLUMNS:
            op.execute(f"ALTER TABLE courses DROP COLUMN {name}")
        return
    for name in COLUMNS:
        op.drop_column("courses", name)
