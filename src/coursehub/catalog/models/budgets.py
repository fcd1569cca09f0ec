"""Weekly compute budgets raised for one student (migration ``0012``).

``budget_overrides``
    One row per course and student whose team gave them another weekly
    budget than the course's (``courses.budget_cpu_hours`` /
    ``budget_gpu_hours``): CPU- and GPU-hours (None: the course's figure), the
    team member who set it (``set_by``, a username) and when (``set_at``, UTC).
    A row goes with its course or its person (``ON DELETE CASCADE``).

The arithmetic: :mod:`coursehub.meter.budget`; reading and writing them:
:mod:`coursehub.catalog.budgets`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from coursehub.catalog.models.base import Base, UTCDateTime


class BudgetOverride(Base):
    """One student's weekly budget in one course, set by its team."""

    __tablename__ = "budget_overrides"
    __table_args__ = (UniqueConstraint("course_pk", "person_pk"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    course_pk: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    person_pk: Mapped[int] = mapped_column(ForeignKey("people.id", ondelete="CASCADE"), index=True)
    cpu_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    set_by: Mapped[str] = mapped_column(String(128))
    set_at: Mapped[datetime] = mapped_column(UTCDateTime())
