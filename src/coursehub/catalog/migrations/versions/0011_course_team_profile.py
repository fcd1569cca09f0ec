"""Courses: a resource profile of their own for the teaching team.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03

One nullable column, ``courses.team_profile_pk`` (see
:class:`coursehub.catalog.models.courses.Course`): NULL, as every course has
it after this revision, gives the team (hub group ``formgrade-{course_id}``)
the students' profile, which is what the sync wrote on both groups before
(the-littlest-jupyterhub#955 asks for the two to differ).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None

FOREIGN_KEY = "fk_courses_team_profile_pk_resource_profiles"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.add_column("courses", sa.Column("team_profile_pk", sa.Integer(), nullable=True))
        op.create_foreign_key(
            op.f(FOREIGN_KEY), "courses", "resource_profiles", ["team_profile_pk"], ["id"]
        )
        return
    # SQLite adds a column with its REFERENCES clause in place (sqlite.org/lang_altertable.html);
    # batch mode would rebuild the table, and dropping the old one with foreign keys enforced
    # deletes every membership of the courses (ON DELETE CASCADE)
    op.execute(
        f"ALTER TABLE courses ADD COLUMN team_profile_pk INTEGER CONSTRAINT {FOREIGN_KEY}"
        " REFERENCES resource_profiles (id)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # in place (ALTER TABLE ... DROP COLUMN, SQLite >= 3.35, sqlite.org/lang_altertable.html):
        # a batch rebuild would delete every membership of the courses, as above
        op.execute("ALTER TABLE courses DROP COLUMN team_profile_pk")
        return
    op.drop_constraint(op.f(FOREIGN_KEY), "courses", type_="foreignkey")
    op.drop_column("courses", "team_profile_pk")
