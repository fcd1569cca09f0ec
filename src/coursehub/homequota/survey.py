"""Students' homes near their quota: the catalog's limits against the file system's usage.

Each student's limit is :func:`coursehub.homequota.plan.student_quotas`'s; the
home ``HOMES/USER`` (``COURSEHUB_HOMES_DIR``, default ``/home``) is read by
its backend (:func:`coursehub.homequota.fs.detect_backend`,
:func:`coursehub.homequota.reading.read_home_usage`), whose own limit, where it
has one, is the one the file system enforces and wins. Read by ``coursehub
doctor`` and the course app's Prometheus series.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from coursehub.homequota.fs import QuotaBackend

#: Percent of its quota from which a home is "near" it (``coursehub doctor``'s default).
NEAR_PERCENT = 90.0
#: The folder of students' homes (``HOMES/USER``).
HOMES_VAR = "COURSEHUB_HOMES_DIR"
DEFAULT_HOMES = "/home"
#: Reads ``(bytes used, limit or None)`` of a home
#: (:func:`coursehub.homequota.reading.read_home_usage`).
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
    ``read`` and ``detect`` default to :func:`coursehub.homequota.reading.read_home_usage`
    and :func:`coursehub.homequota.fs.detect_backend`.
    """
    from coursehub.homequota.fs import QuotaError, detect_backend
    from coursehub.homequota.reading import read_home_usage

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
