"""Usage units remember whether the hub recorded them: a hub record takes over a user's unit.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

``usage_units.from_hub``: true when the unit's row was made from the hub's
own usage folder, false when from a file a user wrote (the jobs folder). A
record of the hub for a unit id first claimed by a user takes the row over
(docs/usage.md). Rows made before: true, except a ``job`` row whose id is
not a job id (``job:...``), which only a user's record could have made.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("usage_units") as batch:
        batch.add_column(
            sa.Column("from_hub", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    op.execute(
        "UPDATE usage_units SET from_hub = false WHERE kind = 'job' AND unit_id NOT LIKE 'job:%'"
    )
    with op.batch_alter_table("usage_units") as batch:
        batch.alter_column("from_hub", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("usage_units") as batch:
        batch.drop_column("from_hub")
