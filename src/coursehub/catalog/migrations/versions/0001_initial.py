"""Initial catalog schema: years, portals, profiles, courses, groups, people, memberships, material.

Revision ID: 0001
Revises: (none)
Create Date: 2025-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "academic_years",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=9), nullable=False),
        sa.Column("start_year", sa.Integer(), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_academic_years")),
        sa.UniqueConstraint("label", name=op.f("uq_academic_years_label")),
        sa.UniqueConstraint("start_year", name=op.f("uq_academic_years_start_year")),
    )
    op.create_table(
        "people",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=128), nullable=False),
        sa.Column("first_name", sa.String(length=200), nullable=False),
        sa.Column("last_name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("student_number", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_people")),
        sa.UniqueConstraint("student_number", name=op.f("uq_people_student_number")),
        sa.UniqueConstraint("username", name=op.f("uq_people_username")),
    )
    op.create_table(
        "portals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_portals")),
        sa.UniqueConstraint("code", name=op.f("uq_portals_code")),
    )
    op.create_table(
        "resource_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("cpu_limit", sa.Float(), nullable=False),
        sa.Column("mem_limit", sa.BigInteger(), nullable=False),
        sa.Column("n_threads", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("jobs_per_gpu", sa.Integer(), nullable=False),
        sa.CheckConstraint("cpu_limit > 0", name=op.f("ck_resource_profiles_cpu_limit_positive")),
        sa.CheckConstraint("gpus >= 0", name=op.f("ck_resource_profiles_gpus_non_negative")),
        sa.CheckConstraint(
            "jobs_per_gpu >= 1", name=op.f("ck_resource_profiles_jobs_per_gpu_positive")
        ),
        sa.CheckConstraint("mem_limit > 0", name=op.f("ck_resource_profiles_mem_limit_positive")),
        sa.CheckConstraint("n_threads >= 1", name=op.f("ck_resource_profiles_n_threads_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_resource_profiles")),
        sa.UniqueConstraint("name", name=op.f("uq_resource_profiles_name")),
    )
    op.create_table(
        "courses",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=32), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("course_id", sa.String(length=64), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("year_pk", sa.Integer(), nullable=False),
        sa.Column("portal_pk", sa.Integer(), nullable=False),
        sa.Column("profile_pk", sa.Integer(), nullable=True),
        sa.Column("last_sync_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_sync_status", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["portal_pk"], ["portals.id"], name=op.f("fk_courses_portal_pk_portals")
        ),
        sa.ForeignKeyConstraint(
            ["profile_pk"],
            ["resource_profiles.id"],
            name=op.f("fk_courses_profile_pk_resource_profiles"),
        ),
        sa.ForeignKeyConstraint(
            ["year_pk"], ["academic_years.id"], name=op.f("fk_courses_year_pk_academic_years")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_courses")),
        sa.UniqueConstraint("code", "year_pk", name=op.f("uq_courses_code_year_pk")),
        sa.UniqueConstraint("course_id", name=op.f("uq_courses_course_id")),
    )
    op.create_index(op.f("ix_courses_portal_pk"), "courses", ["portal_pk"], unique=False)
    op.create_index(op.f("ix_courses_year_pk"), "courses", ["year_pk"], unique=False)

    op.create_table(
        "course_groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("course_pk", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=2), nullable=False),
        sa.CheckConstraint("kind IN ('TD', 'TP')", name=op.f("ck_course_groups_kind")),
        sa.ForeignKeyConstraint(
            ["course_pk"],
            ["courses.id"],
            name=op.f("fk_course_groups_course_pk_courses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_course_groups")),
        sa.UniqueConstraint("course_pk", "name", name=op.f("uq_course_groups_course_pk_name")),
    )
    op.create_table(
        "course_materials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("course_pk", sa.Integer(), nullable=False),
        sa.Column("git_url", sa.String(length=500), nullable=False),
        sa.Column("branch", sa.String(length=200), nullable=False),
        sa.Column("subpath", sa.String(length=500), nullable=False),
        sa.ForeignKeyConstraint(
            ["course_pk"],
            ["courses.id"],
            name=op.f("fk_course_materials_course_pk_courses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_course_materials")),
        sa.UniqueConstraint("course_pk", name=op.f("uq_course_materials_course_pk")),
    )
    op.create_table(
        "memberships",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("person_pk", sa.Integer(), nullable=False),
        sa.Column("course_pk", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("group_pk", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "role IN ('lead', 'teacher', 'grader', 'student')", name=op.f("ck_memberships_role")
        ),
        sa.ForeignKeyConstraint(
            ["course_pk"],
            ["courses.id"],
            name=op.f("fk_memberships_course_pk_courses"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["group_pk"],
            ["course_groups.id"],
            name=op.f("fk_memberships_group_pk_course_groups"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["person_pk"],
            ["people.id"],
            name=op.f("fk_memberships_person_pk_people"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memberships")),
        sa.UniqueConstraint(
            "person_pk", "course_pk", name=op.f("uq_memberships_person_pk_course_pk")
        ),
    )
    op.create_index(op.f("ix_memberships_course_pk"), "memberships", ["course_pk"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_memberships_course_pk"), table_name="memberships")

    op.drop_table("memberships")
    op.drop_table("course_materials")
    op.drop_table("course_groups")
    op.drop_index(op.f("ix_courses_year_pk"), table_name="courses")
    op.drop_index(op.f("ix_courses_portal_pk"), table_name="courses")

    op.drop_table("courses")
    op.drop_table("resource_profiles")
    op.drop_table("portals")
    op.drop_table("people")
    op.drop_table("academic_years")
