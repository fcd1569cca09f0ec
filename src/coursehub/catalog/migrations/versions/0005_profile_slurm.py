"""Resource profiles: optional Slurm partition, account and QOS.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

NULL means the cluster's default; names are checked by
:func:`coursehub.contract.check_slurm_name` before they are stored.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

COLUMNS = ("partition", "account", "qos")


def upgrade() -> None:
    with op.batch_alter_table("resource_profiles") as batch:
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("resource_profiles") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
