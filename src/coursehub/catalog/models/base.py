"""The declarative base of the catalog's tables and the column types they share.

Conventions (every table module of :mod:`coursehub.catalog.models` follows them)
------------------------------------------------------------------------------
- Every table has an integer primary key ``id``; foreign keys are named
  ``<thing>_pk`` (``course_pk``, ``person_pk``...), because ``course_id`` is
  the field term for nbgrader's string identifier of a course
  (``Course.course_id``, e.g. ``"mlmeca-2025"``, used in the hub group names
  ``nbgrader-{course_id}`` and ``formgrade-{course_id}``).
- Constraint names follow :data:`NAMING_CONVENTION`, so that Alembic
  migrations are identical on SQLite and PostgreSQL.
- Times are timezone-aware, in UTC, on every backend (:class:`UTCDateTime`;
  SQLite alone would hand them back naive).
- Enumerated columns (``Membership.role``, ``CourseGroup.kind``) are typed
  :class:`~coursehub.catalog.models.courses.Role` and
  :class:`~coursehub.catalog.models.courses.GroupKind` in Python
  (:func:`enum_column`); in the database they stay the plain strings
  ``"lead"``, ``"TD"``... of the first migration, guarded by a CHECK
  constraint (:func:`check_in`), so no data migration was needed.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime

from sqlalchemy import DateTime, Enum, MetaData
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

#: Constraint and index names, from SQLAlchemy's "Configuring Constraint
#: Naming Conventions" documentation.
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Return the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC ``DateTime``: naive values are taken as UTC, read values carry UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def check_in(column: str, values: type[enum.StrEnum]) -> str:
    """Return the SQL condition that ``column`` holds one of ``values``.

    ``check_in("kind", GroupKind) == "kind IN ('TD', 'TP')"``.
    """
    return f"{column} IN ({', '.join(repr(str(v)) for v in values)})"


def enum_column(values: type[enum.StrEnum], length: int) -> Enum:
    """Return the column type of a :class:`enum.StrEnum`: stored as ``VARCHAR(length)``.

    The stored strings are the members' values (``values_callable``), not
    their names; strings bound to it are checked in Python
    (``validate_strings``: an unknown one raises ``StatementError`` before
    any SQL). No constraint of its own (``create_constraint=False``): the
    table's named CHECK (:func:`check_in`) guards the database, as it did
    when the column was a plain ``String`` (same DDL on SQLite and
    PostgreSQL, so no migration). See SQLAlchemy's ``sqlalchemy.types.Enum``.
    """
    return Enum(
        values,
        native_enum=False,
        create_constraint=False,
        validate_strings=True,
        length=length,
        values_callable=lambda members: [m.value for m in members],
    )


class Base(DeclarativeBase):
    """Declarative base of every catalog table, carrying the naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class TimestampMixin:
    """``created_at`` / ``updated_at`` columns, set by Python on insert and update."""

    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
