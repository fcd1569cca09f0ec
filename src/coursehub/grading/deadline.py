"""Due dates in the course's time zone, the deadline at submit time, penalties after a change.

nbgrader stores due dates naive in UTC (``nbgrader.utils.parse_utc``) and
shows them so; a course sets its due dates in its own zone
(jupyter/nbgrader#1932). Here:

* :func:`localize` reads a wall-clock time in an IANA zone (:mod:`zoneinfo`)
  and refuses the times a daylight-saving change skips (02:30 on the spring
  day in Europe/Paris) or repeats (02:30 on the autumn day) unless an offset
  is given; :func:`format_due` shows a due date in a zone with its
  abbreviation and zone name (``2025-03-30 23:59 CEST (Europe/Paris)``).
* The team's side publishes each assignment's due date and after-due rule
  (:data:`coursehub.grading.latepolicy.AFTER_DUE`) in the exchange,
  ``<exchange>/<course_id>/deadlines.json`` (0o644: due dates are no secret),
  so that a student's submit, which cannot read the course directory,
  knows them: :func:`plan_submit` refuses after a hard deadline, and
  before a late submission replaces an on-time one asks the student to
  submit again to confirm (jupyter/nbgrader#1171). Collect enforces the
  rule again (:class:`coursehub.grading.collect.VerifiedCollect`): a student
  can always run nbgrader's own submit.
* :func:`reapply_late_penalties` recomputes the late penalty of every
  graded submission from the gradebook after the due date or the policy
  changed, as nbgrader's ``AssignLatePenalties`` would at the next
  autograde (``nbgrader/preprocessors/latesubmissions.py``: the plugin's
  penalty clamped to ``[0, score]``, per notebook), so the grade table
  follows the new date at once (jupyter/nbgrader#723).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.grading.latepolicy import (
    AFTER_DUE,
    LatePolicy,
    plan_late_penalty,
    read_late_policies,
    read_timezones,
)
from coursehub.grading.layout import CourseLayout

#: Time zone of due dates when none is named (``COURSEHUB_GRADING_TIMEZONE``).
DEFAULT_TIMEZONE = "UTC"
#: The published deadlines of a course, in its exchange folder.
PUBLISHED_FILE = "deadlines.json"
#: Seconds within which submitting again confirms a late submission that replaces an on-time one.
CONFIRM_WINDOW_S = 600
#: Marker of a pending confirmation, in the student's nbgrader cache of the course.
CONFIRM_MARKER = ".late-confirm+{student}+{assignment}"


def default_timezone(environ: Mapping[str, str] | None = None) -> str:
    """Return the course's zone: ``COURSEHUB_GRADING_TIMEZONE`` or :data:`DEFAULT_TIMEZONE`."""
    env = os.environ if environ is None else environ
    return env.get("COURSEHUB_GRADING_TIMEZONE") or DEFAULT_TIMEZONE


def zone_of(name: str) -> ZoneInfo:
    """Return the IANA zone ``name``.

    Raises
    ------
    UsageError
        For an unknown zone.
    """
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"time zone {name!r} is unknown: use a name such as Europe/Paris or UTC"
        ) from None


def localize(local: datetime, timezone: str) -> datetime:
    """Return the wall-clock time ``local`` of ``timezone`` as an aware UTC datetime (pure).

    An aware ``local`` (an explicit offset) is only converted.

    Raises
    ------
    UsageError
        For an unknown zone; a time that does not exist there (skipped by
        the spring change) or that exists twice (repeated by the autumn
        change), naming both offsets to choose from.
    """
    zone = zone_of(timezone)
    if local.tzinfo is not None:
        return local.astimezone(UTC)
    first, second = local.replace(tzinfo=zone, fold=0), local.replace(tzinfo=zone, fold=1)
    shown = local.strftime("%Y-%m-%d %H:%M")
    if first.utcoffset() == second.utcoffset():
        return first.astimezone(UTC)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != local:
        raise UsageError(
            f"due date {shown} does not exist in {zone.key}: the clocks jump forward that night; "
            "choose a time outside the skipped hour"
        )
    first_text, second_text = (f"{shown}{_offset(d)} ({d.tzname()})" for d in (first, second))
    raise UsageError(
        f"due date {shown} happens twice in {zone.key} (the clocks go back that night): "
        f"write {first_text} for the first or {second_text} for the second"
    )


def _offset(moment: datetime) -> str:
    text = moment.strftime("%z")
    return f"{text[:3]}:{text[3:]}"


def format_due(due: datetime | None, timezone: str) -> str:
    """Return ``due`` as read in ``timezone``: ``2025-03-30 23:59 CEST (Europe/Paris)`` (pure).

    A naive ``due`` is UTC (nbgrader's gradebook); None is ``no due date``.
    """
    if due is None:
        return "no due date"
    zone = zone_of(timezone)
    local = _aware(due).astimezone(zone)
    abbreviation = local.tzname() or _offset(local)
    suffix = "" if abbreviation == zone.key else f" ({zone.key})"
    return f"{local.strftime('%Y-%m-%d %H:%M')} {abbreviation}{suffix}"


def local_input(due: datetime | None, timezone: str) -> str:
    """Return ``due`` in ``timezone`` as an HTML ``datetime-local`` value (empty: none; pure)."""
    if due is None:
        return ""
    return _aware(due).astimezone(zone_of(timezone)).strftime("%Y-%m-%dT%H:%M")


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@dataclass(frozen=True)
class Deadline:
    """What a student's submit knows of an assignment: due date (aware UTC), rule, zone, policy."""

    duedate: datetime | None
    after_due: str = "accept"
    timezone: str = "UTC"
    policy: str = "no penalty"

    def shown(self) -> str:
        """The due date as the course shows it."""
        return format_due(self.duedate, self.timezone)


def published_path(exchange_root: Path, course_id: str) -> Path:
    """Return the course's published deadlines file."""
    return exchange_root / course_id / PUBLISHED_FILE


def publish_deadlines(layout: CourseLayout, default_zone: str | None = None) -> Path | None:
    """Write every assignment's :class:`Deadline` to the exchange; return the file.

    An assignment without a recorded zone gets ``default_zone`` (None:
    :func:`default_timezone`).

    None when the course's exchange folder does not exist yet (grading not
    set up); the file is rewritten whole, atomically, 0o644.
    """
    from nbgrader.api import Gradebook

    folder = layout.exchange_root / layout.course_id
    if not folder.is_dir():
        return None
    policies = read_late_policies(layout.course_dir)
    zones = read_timezones(layout.course_dir)
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        dues = {a.name: a.duedate for a in gradebook.assignments}
    entries = {}
    for name in sorted(set(dues) | set(policies)):
        policy = policies.get(name, LatePolicy())
        due = dues.get(name)
        entries[name] = {
            "duedate": None if due is None else _aware(due).isoformat(),
            "after_due": policy.after_due,
            "timezone": zones.get(name) or default_zone or default_timezone(),
            "policy": policy.describe(),
        }
    path = published_path(layout.exchange_root, layout.course_id)
    return write_atomically(path, json.dumps(entries, indent=2) + "\n", mode=0o644)


def read_published(exchange_root: Path, course_id: str) -> dict[str, Deadline]:
    """Return the published deadlines of a course (none published or unreadable: empty)."""
    try:
        data = json.loads(published_path(exchange_root, course_id).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    deadlines = {}
    for name, item in (data if isinstance(data, dict) else {}).items():
        if not isinstance(item, dict):
            continue
        due = item.get("duedate")
        after = item.get("after_due")
        deadlines[name] = Deadline(
            duedate=datetime.fromisoformat(due) if isinstance(due, str) else None,
            after_due=after if after in AFTER_DUE else "accept",
            timezone=str(item.get("timezone") or "UTC"),
            policy=str(item.get("policy") or ""),
        )
    return deadlines


@dataclass(frozen=True)
class SubmitDecision:
    """Whether a submission goes ahead, and the one line to tell the student (may be empty)."""

    allowed: bool
    message: str = ""


def plan_submit(
    where: str,
    now: datetime,
    deadline: Deadline | None,
    on_time: datetime | None,
    confirmed: bool,
) -> SubmitDecision:
    """Decide a submission made at ``now`` (pure).

    Parameters
    ----------
    where
        ``"ps1 of mlmeca-2025"``, for the messages.
    now
        The submission's time (nbgrader's timestamp), aware.
    deadline
        The assignment's published deadline, None when unknown.
    on_time
        When the student's newest earlier submission made before the due
        date was made (from their nbgrader cache), None when there is none.
    confirmed
        Whether the student submitted the same late submission within
        :data:`CONFIRM_WINDOW_S` before (the confirmation asked for).
    """
    if deadline is None or deadline.duedate is None or now <= deadline.duedate:
        return SubmitDecision(True)
    due = deadline.shown()
    if deadline.after_due == "refuse":
        return SubmitDecision(
            False, f"{where} was due {due}, a hard deadline: submissions are closed"
        )
    late = f"{where} is late (due {due})"
    if on_time is None:
        return SubmitDecision(True, f"warning: {late}; late policy: {deadline.policy}")
    earlier = format_due(on_time, deadline.timezone)
    if deadline.after_due == "keep_on_time":
        return SubmitDecision(
            True, f"warning: {late}; your on-time submission of {earlier} stays the one graded"
        )
    if confirmed:
        return SubmitDecision(
            True, f"warning: {late}; it replaces your on-time submission of {earlier}"
        )
    return SubmitDecision(
        False,
        f"{late}: it would replace your on-time submission of {earlier} and be graded late "
        f"({deadline.policy}); nothing was submitted, submit again within "
        f"{CONFIRM_WINDOW_S // 60} minutes to replace it",
    )


def newest_on_time(cache: Path, student: str, assignment: str, due: datetime) -> datetime | None:
    """Return the newest submission of the student's cache made before ``due`` (None: none).

    nbgrader's submit keeps a copy of each submission in the student's
    cache, ``<cache>/<course_id>/<student>+<assignment>+<timestamp>``.
    """
    from nbgrader.utils import parse_utc

    times = []
    for entry in _listdir(cache):
        parts = entry.name.split("+")
        if len(parts) in (3, 4) and parts[0] == student and parts[1] == assignment:
            try:
                times.append(_aware(parse_utc(parts[2])))
            except (ValueError, OverflowError):
                continue
    on_time = [t for t in times if t <= due]
    return max(on_time) if on_time else None


def take_confirmation(cache: Path, student: str, assignment: str, now: float | None = None) -> bool:
    """Return whether a recent confirmation marker is there (it is removed); leave one if not."""
    marker = cache / CONFIRM_MARKER.format(student=student, assignment=assignment)
    moment = time.time() if now is None else now
    try:
        recent = moment - marker.stat().st_mtime <= CONFIRM_WINDOW_S
    except FileNotFoundError:
        recent = False
    if recent:
        marker.unlink(missing_ok=True)
        return True
    cache.mkdir(parents=True, exist_ok=True)
    marker.touch()
    os.utime(marker, (moment, moment))
    return False


def decide_submit(
    exchange_root: Path,
    course_id: str,
    assignment: str,
    student: str,
    now: datetime,
    cache: Path,
) -> SubmitDecision | None:
    """Return what the published deadline says of ``student`` submitting now; None: no due date.

    ``now``: aware UTC; ``cache``: the student's nbgrader cache of the course,
    where their earlier submissions (and a pending confirmation) are found.
    A late submission that would replace an on-time one under ``accept`` is
    confirmed by submitting again (:func:`take_confirmation`).
    """
    deadline = read_published(exchange_root, course_id).get(assignment)
    if deadline is None or deadline.duedate is None:
        return None
    on_time = newest_on_time(cache, student, assignment, deadline.duedate)
    needs_confirm = deadline.after_due == "accept" and on_time is not None
    confirmed = (
        needs_confirm and now > deadline.duedate and take_confirmation(cache, student, assignment)
    )
    return plan_submit(f"{assignment} of {course_id}", now, deadline, on_time, confirmed)


def _listdir(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


@dataclass(frozen=True)
class PenaltyChange:
    """A graded submission whose late penalty changed: points before and after."""

    student_id: str
    before: float
    after: float


def reapply_late_penalties(
    layout: CourseLayout, assignment: str, policy: LatePolicy
) -> list[PenaltyChange]:
    """Recompute the late penalty of each graded submission of ``assignment``; return the changes.

    Each notebook's penalty is ``plan_late_penalty`` of its score and the
    submission's ``total_seconds_late`` (nbgrader's, the student's
    extension included), clamped to ``[0, score]`` as nbgrader does.
    """
    from nbgrader.api import Gradebook, MissingEntry

    changes = []
    with Gradebook(layout.db_url, course_id=layout.course_id) as gradebook:
        try:
            submissions = list(gradebook.find_assignment(assignment).submissions)
        except MissingEntry:
            return []
        for submission in submissions:
            before = float(submission.late_submission_penalty or 0.0)
            late_s = float(submission.total_seconds_late)
            for notebook in submission.notebooks:
                penalty = plan_late_penalty(policy, notebook.score, late_s)
                notebook.late_submission_penalty = (
                    None if penalty is None else min(max(penalty, 0.0), notebook.score)
                )
            gradebook.db.commit()
            gradebook.db.refresh(submission)
            after = float(submission.late_submission_penalty or 0.0)
            if after != before:
                changes.append(PenaltyChange(submission.student.id, before, after))
    return sorted(changes, key=lambda c: c.student_id)


def released_deadlines(exchange_root: Path, course_id: str) -> list[tuple[str, Deadline]]:
    """Return ``(assignment, deadline)`` of the released assignments (in ``outbound``), sorted.

    What the course page shows everyone in the course, students included.
    """
    outbound = exchange_root / course_id / "outbound"
    published = read_published(exchange_root, course_id)
    return [(name, published[name]) for name in sorted(published) if (outbound / name).is_dir()]
