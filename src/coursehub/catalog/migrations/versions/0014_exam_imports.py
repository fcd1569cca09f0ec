"""Exams: the top-level modules a student's exam kernel may import.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04

One nullable column on ``exams``, ``allowed_imports`` (see
:class:`coursehub.catalog.models.exams.Exam`): comma-separated top-level
module names; NULL, as every exam has it after this revision, is no list
(every import allowed), which is what every exam had before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # ALTER TABLE ... ADD COLUMN in place, on SQLite too (sqlite.org/lang_altertable.html):
    # a batch rebuild of exams would delete every sitting (ON DELETE CASCADE)
    op.add_column("exams", sa.Column("allowed_imports", sa.Text(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # DROP COLUMN in place (SQLite 3.35+): no rebuild, the sittings stay
        op.execute("ALTER TABLE exams DROP COLUMN allowed_imports")
        return
    op.drop_column("exams", "allowed_imports")
