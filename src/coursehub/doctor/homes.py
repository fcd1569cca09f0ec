"""``coursehub doctor``'s homes check: students' homes near their quota, named.

The survey is :func:`coursehub.homequota.survey.survey_homes`.
"""

from __future__ import annotations

from pathlib import Path

from coursehub.doctor.result import CheckResult, ok, skip, warn
from coursehub.homequota.survey import HOMES_VAR, UsageReader, describe_near, survey_homes


def check_homes(
    url: str | None,
    root: Path,
    warn_at: float = 90.0,
    named: int = 10,
    read: UsageReader | None = None,
) -> CheckResult:
    """Warn when students' homes are at ``warn_at`` % of their quota or more, naming them.

    Skipped when ``root`` is no folder, the catalog cannot be read (the
    catalog check says why), no student has a limit and a home, or no home's
    file system gives a usage reading (the first reason is given).
    """
    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.errors import CoursehubError
    from coursehub.homequota.plan import department_default, student_quotas

    if not root.is_dir():
        return skip("homes", f"no folder of homes {root} here ({HOMES_VAR})")
    try:
        with open_catalog(url) as engine, session_scope(engine) as session:
            quotas = student_quotas(session, department_default())
    except CoursehubError:
        return skip("homes", "the catalog cannot be read (see catalog)")
    survey = survey_homes(quotas, root, warn_at, read)
    if not survey.read:
        if survey.unread:
            user, reason = next(iter(survey.unread.items()))
            return skip("homes", f"no home's usage could be read ({user}: {reason})")
        return skip("homes", f"no student with a home quota has a home in {root} yet")
    if survey.near:
        return warn(
            "homes",
            f"{len(survey.near)} of {survey.read} homes in {root} at {warn_at:g} % of their "
            f"quota or more: {describe_near(survey.near, named)}; ask them to clean up, or "
            "raise the quota (coursehub home quota, then coursehub home apply)",
        )
    return ok("homes", f"{survey.read} homes in {root} below {warn_at:g} % of their quota")
