"""The students' assignment list, with submission times in the course's zone.

nbgrader's list (``nbgrader/exchange/default/list.py``, 0.9), what the
Lab's Assignment List shows, prints a submission's time as recorded, in UTC
(``2025-03-30 22:10:00.000000 UTC``), while the course's due dates are
shown in its zone (jupyter/nbgrader#1932). :class:`ZonedList` shows each
submission's time in the assignment's zone, as the published deadlines
name it (:func:`coursehub.grading.deadline.read_published`), else in
``ExchangeList.timezone`` of the students' config
(:func:`coursehub.grading.studentconfig.render_student_config`):
``2025-03-31 00:10:00 CEST (Europe/Paris)``.

Only the display changes: submissions are still *recorded* in UTC, as
nbgrader's ``Exchange.timezone`` defaults. Recording them in the zone
instead (``c.Exchange.timezone = 'Europe/Paris'``) would write ``CEST``,
an abbreviation nbgrader's own ``parse_utc`` cannot read back
(``dateutil.tz.gettz('CEST')`` is None): it would take 23:30 CEST for
23:30 UTC and grade an on-time submission late; an offset (``+0200``)
breaks the ``student+assignment+time`` folder names.
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

from nbgrader.exchange.default.list import ExchangeList
from nbgrader.utils import parse_utc

from coursehub.errors import UsageError
from coursehub.grading.deadline import read_published, zone_of


def format_submitted(timestamp: str, timezone: str) -> str:
    """Return nbgrader's recorded submission time as read in ``timezone`` (pure).

    ``2025-03-30 22:10:00.000000 UTC`` in Europe/Paris is
    ``2025-03-31 00:10:00 CEST (Europe/Paris)``. A time or zone that
    cannot be read is returned unchanged.
    """
    try:
        moment = parse_utc(timestamp)
        zone = zone_of(timezone)
    except (ValueError, OverflowError, UsageError):
        return timestamp
    local = moment.replace(tzinfo=UTC).astimezone(zone)
    abbreviation = local.tzname() or local.strftime("%z")
    suffix = "" if abbreviation == zone.key else f" ({zone.key})"
    return f"{local:%Y-%m-%d %H:%M:%S} {abbreviation}{suffix}"


class ZonedList(ExchangeList):
    """nbgrader's list; each submission's time shown in its assignment's zone."""

    def parse_assignments(self) -> list[dict[str, Any]]:
        assignments: list[dict[str, Any]] = super().parse_assignments()
        if not (self.inbound or self.cached):
            return assignments
        zones: dict[str, dict[str, str]] = {}
        for assignment in assignments:
            course_id = assignment["course_id"]
            if course_id not in zones:
                published = read_published(Path(self.root), course_id)
                zones[course_id] = {name: d.timezone for name, d in published.items()}
            zone = zones[course_id].get(assignment["assignment_id"]) or self.timezone
            for info in assignment["submissions"]:
                info["timestamp"] = format_submitted(info["timestamp"], zone)
        return assignments
