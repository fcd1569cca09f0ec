"""Resource profiles: a GPU memory budget per runner job.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05

``resource_profiles.gpu_mem_limit``: the GPU memory one runner job of the
course may hold, in bytes, CUDA context included (as NVML reports a
process's memory); NULL: no budget of its own, an equal share of the GPU.
Validated by :func:`coursehub.contract.make_profile`. Added in place
(``ALTER TABLE ... ADD COLUMN``, on SQLite too, sqlite.org/lang_altertable.html);
every existing profile keeps its meaning.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("resource_profiles", sa.Column("gpu_mem_limit", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":  # in place (SQLite 3.35+): no table rebuild
        op.execute("ALTER TABLE resource_profiles DROP COLUMN gpu_mem_limit")
    else:
        op.drop_column("resource_profiles", "gpu_mem_limit")
