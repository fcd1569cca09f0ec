"""Alembic environment for the catalog: runs on the engine given by ``coursehub.catalog.schema``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from coursehub.catalog.db import make_engine
from coursehub.catalog.models import budgets, courses, exams, lti, usage
from coursehub.catalog.models.base import Base

#: The table modules whose tables ``Base.metadata`` holds once imported: autogenerate
#: compares the database with exactly these (a new table module is named here).
TABLE_MODULES = (budgets, courses, exams, lti, usage)

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run the migrations on the engine in ``config.attributes``, or on the URL."""
    engine: Engine | None = config.attributes.get("engine")
    if engine is None:
        engine = make_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("coursehub migrations run online only: use `coursehub db upgrade`")
run_migrations_online()
