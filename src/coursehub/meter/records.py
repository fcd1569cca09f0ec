"""One usage record: a JSON object on one line, written by the hub or the runner.

A *unit* is one server or one runner job. Its records are ``open`` (it
started), ``sample`` (its counters now) and ``close`` (it ended, with its
exit reason). Counters are cumulative since the unit started, so a lost
record loses nothing but the time between two records.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from coursehub.errors import CoursehubError

#: Record kinds, in a unit's life order.
EVENTS = ("open", "sample", "close")
#: Unit kinds.
UNIT_KINDS = ("server", "job")
#: Largest byte count kept (a 64-bit signed integer, the catalog's column).
MAX_INT = 2**63 - 1
#: Longest text field kept (user names, course ids, reasons are cut there).
MAX_TEXT = 200


class RecordError(CoursehubError):
    """A usage line that is not a usage record."""


@dataclass(frozen=True)
class UsageRecord:
    """What one server or job had used at time ``at``.

    Attributes
    ----------
    event
        ``open``, ``sample`` or ``close``.
    unit_id
        Unique id of the server or job (``server:<hub id>:<user>:<name>:<start>``, a job id).
    kind
        ``server`` or ``job``.
    user
        Hub user name.
    course_id
        The course the unit ran for (``""`` when none).
    at
        Unix time of the record, in seconds.
    started_at
        Unix time the unit started, in seconds.
    cpu_s
        CPU-seconds used since start (user + system).
    mem_peak_bytes
        Peak memory since start, in bytes.
    gpu_s
        GPU-seconds held since start (wall time times GPUs held).
    gpu_peak_bytes
        Peak GPU memory, in bytes (0 without a GPU).
    exit_reason
        On ``close``: ``"exit 0"``, ``"stopped"``, the runner's kill reason...
    cpu_limit
        CPUs the unit may use at most (a cgroup quota), 0 when not limited
        below the host's; it only narrows the CPU bound at ingest
        (:mod:`coursehub.meter.bounds`).
    """

    event: str
    unit_id: str
    kind: str
    user: str
    course_id: str
    at: float
    started_at: float
    cpu_s: float = 0.0
    mem_peak_bytes: int = 0
    gpu_s: float = 0.0
    gpu_peak_bytes: int = 0
    exit_reason: str = ""
    cpu_limit: float = 0.0


_NUMBERS = {"at", "started_at", "cpu_s", "gpu_s", "cpu_limit"}
_INTS = {"mem_peak_bytes", "gpu_peak_bytes"}


def shown(text: str) -> str:
    """Return ``text`` for a message: as it is when printable, else as Python's ``ascii()``.

    File names and unit ids come from users; a newline in one must not
    forge a line of the ingest's report.
    """
    return text if text.isprintable() else ascii(text)


def render_record(record: UsageRecord) -> str:
    """Return ``record`` as one JSON line ending in ``\\n`` (keys sorted, ASCII only)."""
    return json.dumps(asdict(record), sort_keys=True, ensure_ascii=True) + "\n"


def parse_record(line: str) -> UsageRecord:
    """Parse one JSON line into a :class:`UsageRecord`.

    Raises
    ------
    RecordError
        If the line is not a JSON object (nested too deeply included) with the
        record's fields and types, a known ``event`` and ``kind``, and
        finite, non-negative counters (byte counts at most :data:`MAX_INT`).
    """
    try:
        data: Any = json.loads(line)
    except ValueError as exc:
        raise RecordError(f"not JSON: {exc}") from exc
    except RecursionError as exc:  # "[[[[...": the decoder's recursion, not a crash
        raise RecordError("not JSON: nested too deeply") from exc
    if not isinstance(data, dict):
        raise RecordError("not a JSON object")
    values: dict[str, Any] = {}
    for spec in fields(UsageRecord):
        if spec.name not in data:
            if spec.default is not MISSING:
                continue
            raise RecordError(f"missing field {spec.name!r}")
        values[spec.name] = _check(spec.name, data[spec.name])
    if values["event"] not in EVENTS:
        raise RecordError(f"event must be one of {', '.join(EVENTS)}, got {values['event']!r}")
    if values["kind"] not in UNIT_KINDS:
        raise RecordError(f"kind must be one of {', '.join(UNIT_KINDS)}, got {values['kind']!r}")
    if not values["unit_id"] or not values["user"]:
        raise RecordError("unit_id and user must not be empty")
    return UsageRecord(**values)


def _check(name: str, value: Any) -> Any:
    if name in _NUMBERS | _INTS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RecordError(f"{name} must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise RecordError(f"{name} must be finite and not negative, got {value!r}")
        if name in _INTS and value > MAX_INT:
            raise RecordError(f"{name} must be at most {MAX_INT}, got {value:.3g}")
        return int(value) if name in _INTS else float(value)
    if not isinstance(value, str):
        raise RecordError(f"{name} must be text, got {value!r}")
    return value[:MAX_TEXT]


#: How a server's ``exit_reason`` carries its cgroup's OOM kills (``stopped; 2 OOM kills``).
OOM_KILLS_RE = re.compile(r"; (\d+) OOM kills?$")


def with_oom_kills(exit_reason: str, oom_kills: int | None) -> str:
    """Return ``exit_reason`` with the server cgroup's OOM kill count, when there were any.

    The count is the cgroup's ``oom_kill`` (kernels and the server together,
    :class:`coursehub.resources.cgroups.CgroupStats`); :func:`oom_kills_of` reads it back.
    """
    if not oom_kills or oom_kills <= 0:
        return exit_reason
    return f"{exit_reason}; {oom_kills} OOM kill{'s' if oom_kills > 1 else ''}"


def oom_kills_of(exit_reason: str) -> int:
    """Return the OOM kill count written by :func:`with_oom_kills` (0 when none)."""
    found = OOM_KILLS_RE.search(exit_reason or "")
    return int(found.group(1)) if found else 0
