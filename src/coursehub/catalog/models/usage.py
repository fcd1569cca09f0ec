"""The catalog's usage tables (migration ``0006``): one row per server or runner job, rolled up.

``usage_units``
    One row per server or job (``unit_id``): user, course, start, last record,
    end, CPU-seconds, peak memory, GPU-seconds, peak GPU memory, exit reason.
``usage_days``
    The rollup: per ``course_id``, UTC ``day`` and ``username``, the CPU- and
    GPU-seconds used that day, the day's peak memory of one unit, and the
    units started that day. A sample's increase since the previous record of
    its unit is added to the sample's day (so usage across midnight lands on
    either side within one sampling interval).
``usage_journals``
    How far each usage file was read (byte offset), so that ingesting again
    reads only what was appended.

Reading, rolling up and pruning them: :mod:`coursehub.catalog.usage`.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import BigInteger, Boolean, Date, Float, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from coursehub.catalog.models.base import Base, UTCDateTime


class UsageUnit(Base):
    """One server or runner job and what it used (cumulative, last record)."""

    __tablename__ = "usage_units"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    unit_id: Mapped[str] = mapped_column(String(300), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    username: Mapped[str] = mapped_column(String(200))
    course_id: Mapped[str] = mapped_column(String(200), index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    mem_peak_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_peak_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    exit_reason: Mapped[str] = mapped_column(String(200), default="")
    #: Made from the hub's own records (False: from a file a user wrote).
    from_hub: Mapped[bool] = mapped_column(Boolean, default=True)


class UsageDay(Base):
    """The rollup: what one user used in one course on one UTC day."""

    __tablename__ = "usage_days"
    __table_args__ = (UniqueConstraint("course_id", "day", "username"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    course_id: Mapped[str] = mapped_column(String(200))
    day: Mapped[date] = mapped_column(Date, index=True)
    username: Mapped[str] = mapped_column(String(200))
    cpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    mem_peak_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    units: Mapped[int] = mapped_column(Integer, default=0)


class UsageJournal(Base):
    """How far one usage file has been read."""

    __tablename__ = "usage_journals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    path: Mapped[str] = mapped_column(String(1000), unique=True)
    offset: Mapped[int] = mapped_column(BigInteger, default=0)
