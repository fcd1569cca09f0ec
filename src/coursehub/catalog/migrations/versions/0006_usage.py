"""Usage accounting: servers and runner jobs, a daily rollup per course and user, files read.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Tables of :mod:`coursehub.catalog.models.usage` (docs/usage.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "usage_units",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("unit_id", sa.String(length=300), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("username", sa.String(length=200), nullable=False),
        sa.Column("course_id", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cpu_s", sa.Float(), nullable=False),
        sa.Column("mem_peak_bytes", sa.BigInteger(), nullable=False),
        sa.Column("gpu_s", sa.Float(), nullable=False),
        sa.Column("gpu_peak_bytes", sa.BigInteger(), nullable=False),
        sa.Column("exit_reason", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_units")),
        sa.UniqueConstraint("unit_id", name=op.f("uq_usage_units_unit_id")),
    )
    op.create_index(op.f("ix_usage_units_course_id"), "usage_units", ["course_id"])
    op.create_table(
        "usage_days",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("course_id", sa.String(length=200), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("username", sa.String(length=200), nullable=False),
        sa.Column("cpu_s", sa.Float(), nullable=False),
        sa.Column("gpu_s", sa.Float(), nullable=False),
        sa.Column("mem_peak_bytes", sa.BigInteger(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_days")),
        sa.UniqueConstraint(
            "course_id", "day", "username", name=op.f("uq_usage_days_course_id_day_username")
        ),
    )
    op.create_index(op.f("ix_usage_days_day"), "usage_days", ["day"])
    op.create_table(
        "usage_journals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=1000), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_journals")),
        sa.UniqueConstraint("path", name=op.f("uq_usage_journals_path")),
    )


def downgrade() -> None:
    op.drop_table("usage_journals")
    op.drop_index(op.f("ix_usage_days_day"), table_name="usage_days")
    op.drop_table("usage_days")
    op.drop_index(op.f("ix_usage_units_course_id"), table_name="usage_units")
    op.drop_table("usage_units")
