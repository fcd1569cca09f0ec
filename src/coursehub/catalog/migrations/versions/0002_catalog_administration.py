"""Catalog administration: the current year, portal managers, where a course was copied from.

Revision ID: 0002
Revises: 0001
Create Date: 2026-01-15

Data: the newest active year of an existing catalog becomes the current one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("academic_years") as batch:
        batch.add_column(
            sa.Column("is_current", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("academic_years") as batch:
        batch.alter_column("is_current", server_default=None)
    with op.batch_alter_table("courses") as batch:
        batch.add_column(sa.Column("copied_from_pk", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_courses_copied_from_pk_courses"),
            "courses",
            ["copied_from_pk"],
            ["id"],
            ondelete="SET NULL",
        )
    op.create_table(
        "portal_managers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("portal_pk", sa.Integer(), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["person_pk"],
            ["people.id"],
            name=op.f("fk_portal_managers_person_pk_people"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["portal_pk"],
            ["portals.id"],
            name=op.f("fk_portal_managers_portal_pk_portals"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_portal_managers")),
        sa.UniqueConstraint(
            "portal_pk", "person_pk", name=op.f("uq_portal_managers_portal_pk_person_pk")
        ),
    )
    op.create_index(
        op.f("ix_portal_managers_person_pk"), "portal_managers", ["person_pk"], unique=False
    )
    years = sa.table(
        "academic_years",
        sa.column("start_year", sa.Integer()),
        sa.column("is_active", sa.Boolean()),
        sa.column("is_current", sa.Boolean()),
    )
    newest = (
        sa.select(sa.func.max(years.c.start_year)).where(years.c.is_active.is_(True))
    ).scalar_subquery()
    op.execute(years.update().where(years.c.start_year == newest).values(is_current=True))


def downgrade() -> None:
    op.drop_index(op.f("ix_portal_managers_person_pk"), table_name="portal_managers")
    op.drop_table("portal_managers")
    with op.batch_alter_table("courses") as batch:
        batch.drop_constraint(op.f("fk_courses_copied_from_pk_courses"), type_="foreignkey")
        batch.drop_column("copied_from_pk")
    with op.batch_alter_table("academic_years") as batch:
        batch.drop_column("is_current")
