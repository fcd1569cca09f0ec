"""Weekly compute budgets set in the catalog, and whether anything checks them here."""

from __future__ import annotations

import os
from collections.abc import Mapping

from coursehub.doctor.result import CheckResult, ok, skip, warn


def check_budgets(url: str | None = None, environ: Mapping[str, str] | None = None) -> CheckResult:
    """Warn when courses set a weekly budget but ``COURSEHUB_BUDGET_URL`` is unset here.

    Budgets are checked at spawn and before runner jobs only where the hub has
    ``COURSEHUB_BUDGET_URL`` (:mod:`coursehub.meter.budgetclient`,
    docs/budgets.md); without it a course's budget is shown on the pages and
    enforced nowhere. This reads the variable of the environment the doctor
    runs in, so run it with the hub's environment (its systemd unit's, or the
    shell that starts the hub).

    Parameters
    ----------
    url
        The catalog's SQLAlchemy URL (None: the default catalog).
    environ
        The environment to read (None: ``os.environ``).
    """
    from sqlalchemy import func, or_, select

    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.catalog.models.budgets import BudgetOverride
    from coursehub.catalog.models.courses import Course
    from coursehub.errors import CoursehubError
    from coursehub.meter.budgetclient import URL_VAR

    env = os.environ if environ is None else environ
    try:
        with open_catalog(url) as engine, session_scope(engine) as session:
            with_budget = or_(
                Course.budget_cpu_hours.is_not(None), Course.budget_gpu_hours.is_not(None)
            )
            courses = session.scalar(select(func.count()).select_from(Course).where(with_budget))
            overrides = session.scalar(select(func.count()).select_from(BudgetOverride))
    except CoursehubError:
        return skip("budgets", "the catalog cannot be read (see catalog)")
    if not courses and not overrides:
        return ok("budgets", "no course sets a weekly compute budget")
    if env.get(URL_VAR, "").strip():
        return ok(
            "budgets", f"{courses} course(s) set a weekly budget, checked through {env[URL_VAR]}"
        )
    return warn(
        "budgets",
        f"{courses} course(s) and {overrides} student override(s) set a weekly budget, but "
        f"{URL_VAR} is unset here: no spawn and no runner job checks them; set it for the hub "
        "(docs/budgets.md)",
    )
