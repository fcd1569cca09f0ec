"""LTI identity: the Instructor a pending link's code belongs to, and account requests.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

Three columns on ``lti_links`` (see :class:`coursehub.catalog.models.lti.LtiLink`:
``instructor_subject``, ``instructor_username``, ``instructor_name``) and one
new table, ``lti_account_requests`` (:class:`coursehub.catalog.models.lti.LtiAccountRequest`).
Links pending before this revision have no Instructor: a hub admin links them,
or an Instructor launches again to get a code of their own.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("lti_links") as batch:
        batch.add_column(sa.Column("instructor_subject", sa.String(length=255), nullable=True))
        batch.add_column(
            sa.Column(
                "instructor_username", sa.String(length=128), nullable=False, server_default=""
            )
        )
        batch.add_column(
            sa.Column("instructor_name", sa.String(length=300), nullable=False, server_default="")
        )
    with op.batch_alter_table("lti_links") as batch:
        batch.alter_column("instructor_username", server_default=None)
        batch.alter_column("instructor_name", server_default=None)
    op.create_table(
        "lti_account_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=255), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("username", sa.String(length=128), nullable=False),
        sa.Column("link_pk", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["link_pk"],
            ["lti_links.id"],
            name=op.f("fk_lti_account_requests_link_pk_lti_links"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_account_requests")),
        sa.UniqueConstraint(
            "issuer", "subject", name=op.f("uq_lti_account_requests_issuer_subject")
        ),
    )
    op.create_index(
        op.f("ix_lti_account_requests_link_pk"), "lti_account_requests", ["link_pk"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_lti_account_requests_link_pk"), table_name="lti_account_requests")
    op.drop_table("lti_account_requests")
    with op.batch_alter_table("lti_links") as batch:
        batch.drop_column("instructor_name")
        batch.drop_column("instructor_username")
        batch.drop_column("instructor_subject")
