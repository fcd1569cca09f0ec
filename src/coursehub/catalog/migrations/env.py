"""Alembic environment for the catalog: runs on the engine given by ``coursehub.catalog.schema``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

import coursehub.catalog.lti  # noqa: F401  (registers the LTI tables on Base.metadata)
from coursehub.catalog import usage as _usage  # noqa: F401  (registers the usage tables)
from coursehub.catalog.db import make_engine
from coursehub.catalog.models import Base

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
