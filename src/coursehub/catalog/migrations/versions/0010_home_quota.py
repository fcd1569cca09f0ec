"""Home quotas: bytes a student may keep in their home, per course and per portal.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

One nullable column ``home_quota`` (bytes) on ``courses`` and on ``portals``
(see :class:`coursehub.catalog.models.courses.Course`): None means the
portal's value, then the department's default (``COURSEHUB_HOME_QUOTA``).
Every course and portal before this revision has None.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    for table in ("courses", "portals"):
        # SQLite adds a column in place; a batch rebuild would drop the old table, and with
        # foreign keys enforced that fails (portals) or deletes every membership (courses)
        op.add_column(table, sa.Column("home_quota", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    for table in ("courses", "portals"):
        # in place on SQLite too (ALTER TABLE ... DROP COLUMN, SQLite >= 3.35,
        # sqlite.org/lang_altertable.html), for the same reason as above
        op.drop_column(table, "home_quota")
