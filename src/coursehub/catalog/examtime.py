"""An exam's timing: the window, a student's allowance, their end, whether they may start (pure).

The model is PrairieLearn's timed assessments ("Access control", ``timeLimitMin``
with ``startDate`` and ``endDate``, docs/accessControl.md): a student's time
starts when they start, within the window, and a time limit never runs past
the end date ("the time limit is reduced so that the assessment closes at the
end date"). Here:

* :class:`Window`: when the exam opens, its duration (minutes) and its hard
  end, aware UTC datetimes (shown in the course's zone,
  :func:`coursehub.catalog.examtime.format_moment`);
* :class:`Allowance`: extra time for accommodations, in minutes and in
  percent of the duration, and optionally another window (a conflict slot);
  a student's own allowance replaces their group's (:func:`pick_allowance`);
* :func:`plan_end`: ``min(start + duration x (1 + percent/100) + minutes +
  added, hard end)``, ``added`` being what a proctor gave live;
* :func:`plan_start`: a start before the opening, after the hard end or
  with a wrong start code is refused with a message that says why.

Nothing here reads the clock or a database: times are passed in.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from coursehub.errors import UsageError

#: Longest duration of an exam, in minutes (a day: anything longer is a typo).
MAX_DURATION_MIN = 24 * 60
#: Most extra time in percent of the duration (accommodations go up to a third or a half,
#: sometimes double time: 100 %; 300 % leaves room).
MAX_EXTRA_PERCENT = 300
#: Most extra (or live added) minutes.
MAX_EXTRA_MIN = 24 * 60


@dataclass(frozen=True)
class Window:
    """When an exam may be sat: ``opens_at`` and ``hard_end`` (aware UTC), ``duration_min``.

    ``timezone``: the IANA zone the course shows the times in.
    """

    opens_at: datetime
    duration_min: int
    hard_end: datetime
    timezone: str = "UTC"


@dataclass(frozen=True)
class Allowance:
    """Extra time of a student or a group: ``minutes`` and ``percent`` of the duration.

    ``opens_at``/``hard_end`` (None: the exam's): another window, a conflict slot.
    """

    minutes: int = 0
    percent: int = 0
    opens_at: datetime | None = None
    hard_end: datetime | None = None

    def describe(self, timezone: str | None = None) -> str:
        """One line: ``"+33 %, +10 min, own window"``.

        With ``timezone`` (an IANA name) the own window's times are shown:
        ``"+33 %, opens 2026-01-13 10:00 CET (Europe/Paris), hard end ..."``.
        """
        parts = []
        if self.percent:
            parts.append(f"+{self.percent} %")
        if self.minutes:
            parts.append(f"+{self.minutes} min")
        if timezone is None:
            if self.opens_at is not None or self.hard_end is not None:
                parts.append("own window")
        else:
            if self.opens_at is not None:
                parts.append(f"opens {format_moment(self.opens_at, timezone)}")
            if self.hard_end is not None:
                parts.append(f"hard end {format_moment(self.hard_end, timezone)}")
        return ", ".join(parts) or "no extra time"


def pick_allowance(own: Allowance | None, group: Allowance | None) -> Allowance:
    """Return the allowance that applies: the student's own, else their group's, else none."""
    if own is not None:
        return own
    return group if group is not None else Allowance()


def window_for(window: Window, allowance: Allowance) -> Window:
    """Return ``window`` with the allowance's own opening and hard end, if it has them."""
    return replace(
        window,
        opens_at=allowance.opens_at or window.opens_at,
        hard_end=allowance.hard_end or window.hard_end,
    )


def allowed_minutes(duration_min: int, allowance: Allowance, added_min: int = 0) -> float:
    """Return the minutes a student has: ``duration x (1 + percent/100) + minutes + added``."""
    return duration_min * (1 + allowance.percent / 100) + allowance.minutes + added_min


def plan_end(
    window: Window, start: datetime, allowance: Allowance = Allowance(), added_min: int = 0
) -> datetime:
    """Return when a student who started at ``start`` must stop (aware UTC).

    ``min(start + allowed_minutes, hard end)``, the hard end being the
    allowance's own when it has one; seconds are kept (a start at 10:00:17
    with 60 minutes ends at 11:00:17).
    """
    own = window_for(window, allowance)
    ends = start + timedelta(minutes=allowed_minutes(window.duration_min, allowance, added_min))
    return min(ends, own.hard_end)


@dataclass(frozen=True)
class StartDecision:
    """Whether a student may start now, the line that says why not, and whether the reason
    is a wrong start code (``wrong_code``: one given, and not the exam's)."""

    allowed: bool
    message: str = ""
    wrong_code: bool = False


def plan_start(
    window: Window,
    now: datetime,
    allowance: Allowance = Allowance(),
    code_hash: str | None = None,
    given_code: str | None = None,
) -> StartDecision:
    """Decide whether a student may start at ``now`` (aware) (pure).

    Refused before the opening, at or after the hard end (both the
    allowance's own when it has them) and, when the exam has a start code
    (``code_hash``, :func:`hash_code`), without the right one.
    """
    own = window_for(window, allowance)
    if now < own.opens_at:
        when = format_moment(own.opens_at, window.timezone)
        return StartDecision(False, f"the exam opens at {when}: it cannot be started before")
    if now >= own.hard_end:
        when = format_moment(own.hard_end, window.timezone)
        return StartDecision(False, f"the exam closed at {when}: it can no longer be started")
    if code_hash and not hmac.compare_digest(code_hash, hash_code(given_code or "")):
        what = "no start code was given" if not given_code else "the start code is wrong"
        return StartDecision(
            False,
            f"{what}: ask the proctor for the code announced in the room",
            wrong_code=bool(given_code),
        )
    return StartDecision(True)


def hash_code(code: str) -> str:
    """Return the SHA-256 (hex) of a start code, spaces around it and case ignored."""
    import hashlib

    return hashlib.sha256(code.strip().upper().encode("utf-8")).hexdigest()


def zone_named(name: str) -> ZoneInfo:
    """Return the IANA zone ``name``.

    Raises
    ------
    UsageError
        For an unknown zone, naming it.
    """
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"timezone: {name!r} is unknown; use a name such as Europe/Paris or UTC"
        ) from None


def format_moment(moment: datetime, timezone: str) -> str:
    """Return ``moment`` read in ``timezone``: ``2026-01-12 10:00 CET (Europe/Paris)``.

    Seconds are shown when there are any (a student's end: ``11:00:17``).
    """
    zone = zone_named(timezone)
    local = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(zone)
    abbreviation = local.tzname() or ""
    suffix = "" if abbreviation == zone.key else f" ({zone.key})"
    shown = f"{local:%Y-%m-%d %H:%M}" + (f":{local:%S}" if local.second else "")
    return f"{shown} {abbreviation}{suffix}"


def parse_moment(text: str, timezone: str, field: str) -> datetime:
    """Return the time ``text`` (ISO 8601; without an offset: wall clock of ``timezone``) in UTC.

    Raises
    ------
    UsageError
        Naming ``field``: not a date and time; a wall-clock time that the
        zone's daylight-saving change skips or repeats (give an offset).
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except (AttributeError, ValueError):
        raise UsageError(
            f"{field}: {text!r} is not a date and time (write 2026-01-12T10:00, "
            "optionally with an offset such as +01:00)"
        ) from None
    if moment.tzinfo is not None:
        return moment.astimezone(UTC)
    zone = zone_named(timezone)
    first, second = moment.replace(tzinfo=zone, fold=0), moment.replace(tzinfo=zone, fold=1)
    back = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    if first.utcoffset() != second.utcoffset() or back != moment:
        raise UsageError(
            f"{field}: {text} is skipped or repeated in {zone.key} by a daylight-saving "
            "change; give an offset such as +01:00"
        )
    return first.astimezone(UTC)


def check_window(window: Window) -> None:
    """Refuse an impossible window, naming the field.

    Raises
    ------
    UsageError
        ``duration``: not 1 to :data:`MAX_DURATION_MIN` minutes;
        ``hard_end``: not after ``opens_at``.
    """
    if not 1 <= window.duration_min <= MAX_DURATION_MIN:
        raise UsageError(
            f"duration: must be 1 to {MAX_DURATION_MIN} minutes, got {window.duration_min}"
        )
    if window.hard_end <= window.opens_at:
        raise UsageError(
            f"hard_end: must be after opens_at ({format_moment(window.opens_at, window.timezone)}),"
            f" got {format_moment(window.hard_end, window.timezone)}"
        )


def check_allowance(allowance: Allowance) -> None:
    """Refuse extra time out of range, naming the field.

    Raises
    ------
    UsageError
        ``extra_percent``: not 0 to :data:`MAX_EXTRA_PERCENT`;
        ``extra_minutes``: not 0 to :data:`MAX_EXTRA_MIN`; ``hard_end``: not
        after the allowance's own ``opens_at``.
    """
    if not 0 <= allowance.percent <= MAX_EXTRA_PERCENT:
        raise UsageError(
            f"extra_percent: must be 0 to {MAX_EXTRA_PERCENT}, got {allowance.percent}"
        )
    if not 0 <= allowance.minutes <= MAX_EXTRA_MIN:
        raise UsageError(f"extra_minutes: must be 0 to {MAX_EXTRA_MIN}, got {allowance.minutes}")
    if allowance.opens_at and allowance.hard_end and allowance.hard_end <= allowance.opens_at:
        raise UsageError("hard_end: the slot's hard end must be after its opening")


def check_slot(window: Window, allowance: Allowance) -> None:
    """Refuse an allowance whose own window, completed by the exam's, leaves no time at all.

    A one-sided slot (only its own ``opens_at``, or only its own ``hard_end``)
    is completed by the exam's other end (:func:`window_for`); it must still
    open before it ends.

    Raises
    ------
    UsageError
        ``opens_at``: the slot opens at or after the exam's hard end;
        ``hard_end``: the slot's hard end is at or before the exam's opening.
    """
    own = window_for(window, allowance)
    if own.hard_end > own.opens_at:
        return
    zone = window.timezone
    if allowance.hard_end is None:
        raise UsageError(
            f"opens_at: the slot opens at {format_moment(own.opens_at, zone)}, not before the "
            f"exam's hard end ({format_moment(own.hard_end, zone)}): give its own hard end too"
        )
    raise UsageError(
        f"hard_end: the slot's hard end {format_moment(own.hard_end, zone)} is not after the "
        f"exam's opening ({format_moment(own.opens_at, zone)}): give its own opening too"
    )


def window_warnings(window: Window, now: datetime, allowance: Allowance = Allowance()) -> list[str]:
    """Return what is possible but probably a mistake in a window (pure), one sentence each.

    * the (own) hard end is past at ``now``: nobody can start any more;
    * the window, from the opening to the hard end, is shorter than the
      minutes a student has (:func:`allowed_minutes`): everyone who starts at
      the opening is stopped at the hard end, before their time is over.
    """
    own = window_for(window, allowance)
    zone = window.timezone
    warnings = []
    if own.hard_end <= now:
        warnings.append(
            f"the hard end ({format_moment(own.hard_end, zone)}) is past: nobody can start it"
        )
    span_min = (own.hard_end - own.opens_at).total_seconds() / 60
    minutes = allowed_minutes(window.duration_min, allowance)
    if span_min < minutes:
        warnings.append(
            f"the window is {span_min:g} min from opening to hard end, shorter than the "
            f"{minutes:g} min a student has: even one who starts at the opening is stopped "
            "at the hard end"
        )
    return warnings
