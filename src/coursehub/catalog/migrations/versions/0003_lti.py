"""LTI 1.3: LMS contexts linked to courses, LMS accounts, used launch nonces.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

New tables only (see :mod:`coursehub.catalog.models.lti`); no data changes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "lti_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=255), nullable=False),
        sa.Column("deployment_id", sa.String(length=255), nullable=False),
        sa.Column("context_id", sa.String(length=255), nullable=False),
        sa.Column("context_title", sa.String(length=300), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("course_pk", sa.Integer(), nullable=True),
        sa.Column("first_launch_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_launch_by", sa.String(length=128), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("confirmed_by", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(
            ["course_pk"],
            ["courses.id"],
            name=op.f("fk_lti_links_course_pk_courses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_links")),
        sa.UniqueConstraint("code", name=op.f("uq_lti_links_code")),
        sa.UniqueConstraint(
            "issuer",
            "deployment_id",
            "context_id",
            name=op.f("uq_lti_links_issuer_deployment_id_context_id"),
        ),
    )
    op.create_index(op.f("ix_lti_links_course_pk"), "lti_links", ["course_pk"], unique=False)
    op.create_table(
        "lti_accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=255), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["person_pk"],
            ["people.id"],
            name=op.f("fk_lti_accounts_person_pk_people"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_accounts")),
        sa.UniqueConstraint("issuer", "subject", name=op.f("uq_lti_accounts_issuer_subject")),
    )
    op.create_index(op.f("ix_lti_accounts_person_pk"), "lti_accounts", ["person_pk"], unique=False)
    op.create_table(
        "lti_nonces",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=255), nullable=False),
        sa.Column("nonce", sa.String(length=255), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_nonces")),
        sa.UniqueConstraint("issuer", "nonce", name=op.f("uq_lti_nonces_issuer_nonce")),
    )
    op.create_index(op.f("ix_lti_nonces_expires_at"), "lti_nonces", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_lti_nonces_expires_at"), table_name="lti_nonces")
    op.drop_table("lti_nonces")
    op.drop_index(op.f("ix_lti_accounts_person_pk"), table_name="lti_accounts")
    op.drop_table("lti_accounts")
    op.drop_index(op.f("ix_lti_links_course_pk"), table_name="lti_links")
    op.drop_table("lti_links")
