"""One check's result, the thresholds the checks read, and the report of all of them.

Every check of :mod:`coursehub.doctor.checks` returns one :class:`CheckResult`:
a level (``ok``, ``warn``, ``fail``, or ``skip`` where the check does not
apply here) and one line naming what is wrong, where, and what to do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from coursehub.errors import UsageError

#: The levels, mildest first; ``fail`` makes ``coursehub doctor`` exit with status 1.
LEVELS = ("skip", "ok", "warn", "fail")
#: How each level starts its line of the report.
LABELS = {"ok": "ok", "warn": "warn", "fail": "FAIL", "skip": "skip"}


@dataclass(frozen=True)
class CheckResult:
    """What one check found.

    Attributes
    ----------
    name : str
        The check, e.g. ``"catalog"``, ``"homes"``.
    level : str
        One of :data:`LEVELS`.
    line : str
        One line: what is wrong, where, and what to do (or what was found fine,
        or why the check does not apply).
    """

    name: str
    level: str
    line: str


def ok(name: str, line: str) -> CheckResult:
    """Return a passing result."""
    return CheckResult(name, "ok", line)


def warn(name: str, line: str) -> CheckResult:
    """Return a warning: nothing breaks yet."""
    return CheckResult(name, "warn", line)


def fail(name: str, line: str) -> CheckResult:
    """Return a failure: something named in ``line`` breaks."""
    return CheckResult(name, "fail", line)


def skip(name: str, line: str) -> CheckResult:
    """Return a check that does not apply here; ``line`` says why."""
    return CheckResult(name, "skip", line)


@dataclass(frozen=True)
class Thresholds:
    """The limits the checks compare with (the variables of :data:`VARIABLES`, docs/doctor.md).

    Attributes
    ----------
    disk_warn, disk_fail : float
        Percent of the data folder's disk in use from which it warns, fails (90, 98).
    quota_warn : float
        Percent of a home's quota in use from which the home is named (90).
    named : int
        Usernames named at most on the homes' line; the others are counted (10).
    clock_skew_s : float
        Seconds of skew against the database server's clock that warn (5).
    slurm_timeout_s : float
        Seconds ``scontrol ping`` may take (5).
    backup_age_h : float
        Hours from which the last backup made here is too old (26).
    """

    disk_warn: float = 90.0
    disk_fail: float = 98.0
    quota_warn: float = 90.0
    named: int = 10
    clock_skew_s: float = 5.0
    slurm_timeout_s: float = 5.0
    backup_age_h: float = 26.0


#: variable -> (field of :class:`Thresholds`, type)
VARIABLES = {
    "COURSEHUB_DOCTOR_DISK_WARN": ("disk_warn", float),
    "COURSEHUB_DOCTOR_DISK_FAIL": ("disk_fail", float),
    "COURSEHUB_DOCTOR_QUOTA_WARN": ("quota_warn", float),
    "COURSEHUB_DOCTOR_NAMED": ("named", int),
    "COURSEHUB_DOCTOR_CLOCK_SKEW_S": ("clock_skew_s", float),
    "COURSEHUB_DOCTOR_SLURM_TIMEOUT_S": ("slurm_timeout_s", float),
    "COURSEHUB_DOCTOR_BACKUP_AGE_H": ("backup_age_h", float),
}


def thresholds_from_env(environ: Mapping[str, str] | None = None) -> Thresholds:
    """Return the :class:`Thresholds` of the variables of :data:`VARIABLES` (unset: defaults).

    Raises
    ------
    UsageError
        A value that is not a positive number, naming the variable.
    """
    env = os.environ if environ is None else environ
    values: dict[str, float | int] = {}
    for name, (field, kind) in VARIABLES.items():
        text = env.get(name, "").strip()
        if not text:
            continue
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise UsageError(f"{name}={text!r} must be a positive {kind.__name__}")
        values[field] = value
    return Thresholds(**values)  # type: ignore[arg-type]


def exit_status(results: Sequence[CheckResult]) -> int:
    """Return 1 when a check failed, else 0."""
    return 1 if any(r.level == "fail" for r in results) else 0


def format_report(results: Sequence[CheckResult]) -> str:
    """Return one line per result: ``ok|warn|FAIL|skip  NAME: LINE``."""
    return "".join(f"{LABELS[r.level]:<4}  {r.name}: {r.line}\n" for r in results)


def format_json(results: Sequence[CheckResult]) -> str:
    """Return ``{"status": 0|1, "checks": [{"name", "level", "line"}, ...]}`` as JSON."""
    body = {"status": exit_status(results), "checks": [asdict(r) for r in results]}
    return json.dumps(body, indent=2) + "\n"
