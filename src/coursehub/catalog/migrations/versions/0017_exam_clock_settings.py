"""Exams: the exam clock's settings, per exam.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06

See :mod:`coursehub.catalog.examsettings`:

* ``exams.warn_before_min``: minutes before a student's end when the exam
  clock warns (0: no warning), default 5, the warning every exam had;
* ``exams.fullscreen``: ``offered`` (a button, as before) or ``required``
  (the clock covers the workspace until the student is in full screen),
  default ``offered``.

Columns are added in place with their defaults (``ALTER TABLE ... ADD
COLUMN ... NOT NULL DEFAULT``, on SQLite too, sqlite.org/lang_altertable.html):
a batch rebuild of ``exams`` would delete every sitting through ``ON DELETE
CASCADE``. Every existing exam keeps its behaviour.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None

#: The columns this revision adds to ``exams``, with their defaults.
COLUMNS = ("warn_before_min", "fullscreen")


def upgrade() -> None:
    op.add_column(
        "exams", sa.Column("warn_before_min", sa.Integer(), nullable=False, server_default="5")
    )
    op.add_column(
        "exams",
        sa.Column("fullscreen", sa.String(length=16), nullable=False, server_default="offered"),
    )


def downgrade() -> None:
    for name in reversed(COLUMNS):
        if op.get_bind().dialect.name == "sqlite":  # in place (SQLite 3.35+): no table rebuild
            op.execute(f"ALTER TABLE exams DROP COLUMN {name}")
        else:
            op.drop_column("exams", name)
