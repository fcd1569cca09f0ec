"""Late-submission policies per assignment, applied by nbgrader's own late-penalty step.

nbgrader computes how late a submission is (``SubmittedAssignment.total_seconds_late``:
the submission's ``timestamp.txt``, as nbgrader's submit records it, minus
the assignment's due date) and, while autograding, asks the plugin of
``AssignLatePenalties.plugin_class`` for a penalty, which it clamps to
``[0, score]`` and stores as the notebook's ``late_submission_penalty``
(nbgrader 0.9, ``nbgrader/preprocessors/latesubmissions.py``). The course's
``nbgrader_config.py`` names :class:`CourseLatePenalty`
(:data:`coursehub.grading.layout.LATE_PENALTY_CLASS`), which reads the assignment's policy from
``<course_dir>/coursehub/late-policies.json`` and computes:

``none``
    no penalty (nbgrader's default, ``LateSubmissionPlugin.penalty_method = 'none'``);
``zero``
    the whole score (``penalty_method = 'zero'``);
``per_hour``
    ``points_per_hour`` for each hour late, hours rounded to the nearest
    whole hour: the ``SubMarks`` example of nbgrader's documentation
    ("Late submission plugin", ``docs/source/plugins/late-plugin.rst``),
    with the points configurable.

What happens after the due date (``after_due``, checked when a student
submits and again when the team collects,
:mod:`coursehub.grading.deadline`):

``accept``
    nbgrader's behaviour: a late submission is taken, the newest one is
    collected and penalised;
``keep_on_time``
    a late submission is taken but an on-time one stays the one collected
    (nbgrader's ``ExchangeCollect.before_duedate``; jupyter/nbgrader#1171);
``refuse``
    a hard deadline: submit refuses after it, collect skips late ones.

An assignment without a policy gets ``none`` and ``accept``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nbgrader.plugins import LateSubmissionPlugin

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.grading.layout import CourseLayout
from coursehub.grading.policynames import AFTER_DUE, LATE_METHODS

#: File of the course's policies, in its reports folder.
POLICY_FILE = "late-policies.json"


@dataclass(frozen=True)
class LatePolicy:
    """How a late submission is treated.

    ``method`` of :data:`LATE_METHODS` with its points per hour (the
    penalty), ``after_due`` of :data:`AFTER_DUE` (whether it is taken and
    which submission is graded).
    """

    method: str = "none"
    points_per_hour: float = 0.0
    after_due: str = "accept"

    def describe(self) -> str:
        """One line for the course page: ``"1 point(s) off per hour late"``."""
        if self.method == "per_hour":
            penalty = f"{self.points_per_hour:g} point(s) off per hour late"
        else:
            penalty = LATE_METHODS[self.method]
        if self.after_due == "accept":
            return penalty
        if self.after_due == "refuse":
            return AFTER_DUE["refuse"]
        return f"{penalty}; {AFTER_DUE[self.after_due]}"


def parse_late_policy(
    method: str, points_per_hour: str | float | None = None, after_due: str | None = None
) -> LatePolicy:
    """Return the policy of a form or a file (pure); ``after_due`` None or empty is ``accept``.

    Raises
    ------
    UsageError
        For an unknown method or ``after_due``, or ``per_hour`` without a
        positive, finite number of points.
    """
    if method not in LATE_METHODS:
        raise UsageError(
            f"late-submission policy {method!r} is unknown: choose one of {', '.join(LATE_METHODS)}"
        )
    after = after_due or "accept"
    if after not in AFTER_DUE:
        raise UsageError(
            f"after-due rule {after!r} is unknown: choose one of {', '.join(AFTER_DUE)}"
        )
    if method != "per_hour":
        return LatePolicy(method, after_due=after)
    try:
        points = float(points_per_hour if points_per_hour not in (None, "") else "nan")
    except (TypeError, ValueError):
        points = math.nan
    if not math.isfinite(points) or points <= 0:
        raise UsageError(
            f"late-submission policy per_hour: points per hour {points_per_hour!r} "
            "must be a number above 0"
        )
    return LatePolicy("per_hour", points, after)


def plan_late_penalty(policy: LatePolicy, score: float, seconds_late: float) -> float | None:
    """Return the penalty of a submission ``seconds_late`` late that scored ``score`` (pure).

    None means no penalty (nbgrader then records none); nbgrader clamps
    what is returned to ``[0, score]``.
    """
    if seconds_late <= 0 or policy.method == "none":
        return None
    if policy.method == "zero":
        return score
    return round(seconds_late / 3600.0) * policy.points_per_hour


def policy_path(course_dir: Path) -> Path:
    """Return the file of a course directory's policies."""
    return course_dir / "coursehub" / POLICY_FILE


def read_late_policies(course_dir: Path) -> dict[str, LatePolicy]:
    """Return the policies of the course's assignments (none recorded: an empty dict).

    Raises
    ------
    UsageError
        If the file exists but is not the JSON this module writes.
    """
    path = policy_path(course_dir)
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected an object of assignment -> policy")
    return {
        name: parse_late_policy(
            str(item.get("method", "")), item.get("points_per_hour"), item.get("after_due")
        )
        for name, item in _entries(data).items()
    }


def read_timezones(course_dir: Path) -> dict[str, str]:
    """Return the IANA zone each assignment's due date was typed in (none recorded: absent)."""
    try:
        data = json.loads(policy_path(course_dir).read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return {
        name: str(item["timezone"])
        for name, item in _entries(data).items()
        if isinstance(item.get("timezone"), str) and item["timezone"]
    }


def _entries(data: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(data, dict):
        return {}
    return {name: item for name, item in data.items() if isinstance(item, dict)}


def late_policy(layout: CourseLayout, assignment: str) -> LatePolicy:
    """Return the policy of ``assignment`` (``none`` when it has none)."""
    return read_late_policies(layout.course_dir).get(assignment, LatePolicy())


def save_late_policy(
    layout: CourseLayout, assignment: str, policy: LatePolicy, timezone: str | None = None
) -> Path:
    """Record ``assignment``'s policy and the zone of its due date (atomically); return the file.

    ``timezone`` None keeps the zone recorded before.
    """
    policies = read_late_policies(layout.course_dir)
    zones = read_timezones(layout.course_dir)
    policies[assignment] = policy
    if timezone:
        zones[assignment] = timezone
    entries = {
        name: {**asdict(p), **({"timezone": zones[name]} if name in zones else {})}
        for name, p in sorted(policies.items())
    }
    text = json.dumps(entries, indent=2) + "\n"
    return write_atomically(policy_path(layout.course_dir), text, mode=0o600)


class CourseLatePenalty(LateSubmissionPlugin):
    """nbgrader's late-penalty plugin following the assignment's recorded :class:`LatePolicy`.

    nbgrader creates it inside ``AssignLatePenalties`` (its ``parent``),
    which knows the assignment and the gradebook's URL; the course directory
    is the configured ``CourseDirectory.root``, else the gradebook's folder.
    """

    def late_submission_penalty(
        self, student_id: str, score: float, total_seconds_late: float
    ) -> float | None:
        parent: Any = self.parent
        assignment = str(getattr(parent, "assignment_id", ""))
        policy = read_late_policies(self._course_dir(parent)).get(assignment, LatePolicy())
        penalty = plan_late_penalty(policy, score, total_seconds_late)
        self.log.info(
            "Late policy of %s for %s: %s, %.0f s late: penalty %s",
            assignment,
            student_id,
            policy.describe(),
            total_seconds_late,
            penalty,
        )
        return penalty

    def _course_dir(self, parent: Any) -> Path:
        root = self.config.get("CourseDirectory", {}).get("root")
        if root:
            return Path(str(root))
        db_url = str(getattr(parent, "db_url", ""))
        return Path(db_url.removeprefix("sqlite:///").split("?", 1)[0]).parent
