"""The pure plans of a batch: who is graded, whose earlier outcome stands, how many at once.

:func:`plan_autograde` splits the collected submissions into roster
students and strangers; :func:`plan_pending` keeps the earlier outcomes
that still stand (an interrupted run continues where it stopped);
:func:`plan_parallel` caps the jobs at once by what the runner's backend
holds (:func:`backend_capacity`). None of them reads or writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from coursehub.errors import UsageError
from coursehub.grading.autograde.outcomes import SubmissionOutcome

#: Outcomes kept by a later run without ``force`` (a ``failed`` one is tried again:
#: it may be the host's fault, e.g. a refused job).
KEPT_STATUSES = ("graded", "timeout", "killed", "corrupt")


@dataclass(frozen=True)
class AutogradePlan:
    """Students whose submission is graded, and submitters who are not on the roster."""

    students: tuple[str, ...]
    not_on_roster: tuple[str, ...]


def plan_autograde(submitted: Iterable[str], roster: Iterable[str]) -> AutogradePlan:
    """Split collected submissions into roster students and strangers, each sorted (pure)."""
    submitted, roster = set(submitted), set(roster)
    return AutogradePlan(tuple(sorted(submitted & roster)), tuple(sorted(submitted - roster)))


def backend_capacity(backend: Any, n_threads: int) -> int | None:
    """Return how many jobs of ``n_threads`` the backend runs at once (None: no known limit).

    A :class:`coursehub.runner.local.LocalBackend`: its CPU budget (admission
    slots) divided by ``n_threads``; another backend may say it with a
    ``max_parallel_jobs`` attribute.
    """
    slots = getattr(backend, "slots", None)
    if slots is not None and getattr(slots, "cpu_budget", None):
        return max(1, int(slots.cpu_budget) // max(1, n_threads))
    limit = getattr(backend, "max_parallel_jobs", None)
    return int(limit) if limit else None


def check_parallel(requested: int | None) -> None:
    """Refuse a ``--parallel`` below 1 (None: all that fit, accepted) (pure).

    Raises
    ------
    UsageError
        If ``requested`` < 1.
    """
    if requested is not None and requested < 1:
        raise UsageError(f"--parallel must be at least 1, got {requested}")


def plan_parallel(requested: int | None, capacity: int | None, n_pending: int) -> int:
    """Return how many jobs to keep running at once (pure).

    ``requested`` (``--parallel``; None: all that fit) capped by the
    backend's ``capacity`` and by the number of submissions to grade; at
    least 1.

    Raises
    ------
    UsageError
        If ``requested`` < 1.
    """
    check_parallel(requested)
    wanted = requested if requested is not None else (capacity or 1)
    if capacity is not None:
        wanted = min(wanted, capacity)
    return max(1, min(wanted, n_pending))


@dataclass(frozen=True)
class PendingPlan:
    """Students to grade now, and the earlier outcomes that stand."""

    to_grade: tuple[str, ...]
    kept: tuple[SubmissionOutcome, ...]


def plan_pending(
    students: Iterable[str],
    previous: Mapping[str, SubmissionOutcome],
    stamps: Mapping[str, str],
    autograded: Iterable[str],
    force: bool,
) -> PendingPlan:
    """Split the submissions into those to grade and those graded already (pure).

    An earlier outcome stands when ``force`` is not set, its status is in
    :data:`KEPT_STATUSES`, it was made from the same submission (the same
    nbgrader ``timestamp.txt``, in ``stamps``) and, for ``graded`` and
    ``timeout``, its autograded folder is still there (``autograded``).
    """
    present = set(autograded)
    to_grade, kept = [], []
    for student in students:
        old = previous.get(student)
        stands = (
            not force
            and old is not None
            and old.status in KEPT_STATUSES
            and bool(old.submitted_at)
            and old.submitted_at == stamps.get(student, "")
            and (old.status not in ("graded", "timeout") or student in present)
        )
        if stands and old is not None:
            kept.append(old)
        else:
            to_grade.append(student)
    return PendingPlan(tuple(to_grade), tuple(kept))
