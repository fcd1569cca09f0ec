"""Students' homes near their quota: the catalog's limits, the file system's usage.

Each student's limit is :func:`coursehub.homequota.plan.student_quotas`'s; the
home ``HOMES/USER`` (``COURSEHUB_HOMES_DIR``, default ``/home``) is read by
its backend (:func:`coursehub.homequota.fs.detect_backend`,
:func:`coursehub.homequota.fs.read_home_usage`), whose own limit, where it
has one, is the one the file system enforces and wins.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from coursehub.doctor.result import CheckResult, ok, skip, warn
from coursehub.homequota.fs import QuotaBackend

#: The folder of students' homes (``HOMES/USER``).
HOMES_VAR = "COURSEHUB_HOMES_DIR"
DEFAULT_HOMES = "/home"
#: Reads ``(bytes used, limit or None)`` of a home; :func:`coursehub.homequota.fs.read_home_usage`.
UsageReader = Callable[[object, str], tuple[int, int | None]]


def homes_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return ``$COURSEHUB_HOMES_DIR``, else ``/home``."""
    env = os.environ if environ is None else environ
    return Path(env.get(HOMES_VAR) or DEFAULT_HOMES)


@dataclass
class HomesSurvey:
    """What :func:`survey_homes` found: ``near`` (user, percent), homes read, homes skipped."""

    near: list[tuple[str, float]] = field(default_factory=list)
    read: int = 0
    unread: dict[str, str] = field(default_factory=dict)


def survey_homes(
    quotas: Mapping[str, int | None],
    root: Path,
    warn_at: float,
    read: UsageReader | None = None,
    detect: Callable[[Path], QuotaBackend] | None = None,
) -> HomesSurvey:
    """Read each limited student's home below ``root``; name those at ``warn_at`` % or more.

    Students without a limit or without a home yet are left out; a home whose
    file system gives no reading is counted in ``unread`` with the reason.
    ``read`` and ``detect`` default to :func:`coursehub.homequota.fs.read_home_usage`
    and :func:`coursehub.homequota.fs.detect_backend`.
    """
    from coursehub.homequota.fs import QuotaError, detect_backend, read_home_usage

    reader = read or read_home_usage
    detect = detect or detect_backend
    survey = HomesSurvey()
    for user, planned in quotas.items():
        home = root / user
        if planned is None or not home.is_dir():
            continue
        try:
            backend = detect(home)
            if backend.kind is None:
                raise QuotaError(backend.reason)
            used, enforced = reader(backend, str(home))
        except QuotaError as exc:
            survey.unread[user] = str(exc)
            continue
        survey.read += 1
        percent = 100.0 * used / (enforced or planned)
        if percent >= warn_at:
            survey.near.append((user, percent))
    survey.near.sort(key=lambda item: (-item[1], item[0]))
    return survey


def describe_near(near: list[tuple[str, float]], named: int) -> str:
    """Return ``"alice (97 %), bob (91 %) and 3 more"``: at most ``named`` names (pure)."""
    shown = ", ".join(f"{user} ({percent:.0f} %)" for user, percent in near[:named])
    rest = len(near) - named
    return f"{shown} and {rest} more" if rest > 0 else shown


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
