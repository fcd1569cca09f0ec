"""Alembic migrations of the catalog (see ``coursehub.catalog.schema``)."""
