"""Course material mirrors: credential kind, state, commit, source, pull URL, error, times.

Revision ID: 0004
Revises: 0003
Create Date: 2026-02-01

The credential itself is never in the database: ``credential`` holds its
kind (``""``, ``"token"`` or ``"deploy-key"``); the secret is a private file
on the course app's host (:mod:`coursehub.material.credential`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

#: (name, type, server default used to fill existing rows; dropped afterwards)
TEXT_COLUMNS: tuple[tuple[str, sa.types.TypeEngine[str], str], ...] = (
    ("credential", sa.String(length=16), ""),
    ("state", sa.String(length=16), "new"),
    ("commit", sa.String(length=64), ""),
    ("source", sa.String(length=1300), ""),
    ("pull_url", sa.String(length=1000), ""),
    ("error", sa.Text(), ""),
)
TIME_COLUMNS = ("requested_at", "last_attempt_at", "last_update_at")


def upgrade() -> None:
    with op.batch_alter_table("course_materials") as batch:
        for name, kind, default in TEXT_COLUMNS:
            batch.add_column(
                sa.Column(name, kind, nullable=False, server_default=sa.text(f"'{default}'"))
            )
        for name in TIME_COLUMNS:
            batch.add_column(sa.Column(name, sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("course_materials") as batch:
        for name, _kind, _default in TEXT_COLUMNS:
            batch.alter_column(name, server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("course_materials") as batch:
        for name in reversed(TIME_COLUMNS):
            batch.drop_column(name)
        for name, _kind, _default in reversed(TEXT_COLUMNS):
            batch.drop_column(name)
