"""LTI Advantage grade services: each LMS link's AGS endpoint, for grade passback.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

One new table (see :class:`coursehub.catalog.models.lti.LtiGradeService`); no data changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "lti_grade_services",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("link_pk", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(length=255), nullable=False),
        sa.Column("token_url", sa.String(length=1000), nullable=False),
        sa.Column("lineitems_url", sa.String(length=1000), nullable=False),
        sa.Column("lineitem_url", sa.String(length=1000), nullable=False),
        sa.Column("scopes", sa.String(length=1000), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["link_pk"],
            ["lti_links.id"],
            name=op.f("fk_lti_grade_services_link_pk_lti_links"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_grade_services")),
        sa.UniqueConstraint("link_pk", name=op.f("uq_lti_grade_services_link_pk")),
    )


def downgrade() -> None:
    op.drop_table("lti_grade_services")
