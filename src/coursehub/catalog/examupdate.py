"""Change an exam once made: its allowed imports, allowed address ranges, start code and clock.

The window and the overrides have their own paths (an override per student or
group, :mod:`coursehub.catalog.examoverrides`; time added live); what
:func:`update_exam` changes is read again at each start and each spawn: a
student who starts after the change meets the new start code and address
ranges, and an exam server started after it gets the new import list
(:mod:`coursehub.spawn.examserver` reads the catalog at spawn); a kernel
already running keeps the list it started with. The clock's settings
(``warn_before_min``, ``fullscreen``: :mod:`coursehub.catalog.examsettings`)
reach a running exam clock at its next poll (15 s), as a moved end does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from coursehub.catalog.examimports import parse_import_list
from coursehub.catalog.examnetworks import parse_networks
from coursehub.catalog.examsettings import parse_fullscreen, parse_warn_before
from coursehub.catalog.examtime import hash_code
from coursehub.catalog.models.exams import Exam
from coursehub.errors import UsageError

#: The fields :func:`update_exam` changes; ``""`` clears one of the first three (no list, no
#: code); ``warn_before_min`` and ``fullscreen`` always have a value.
UPDATABLE = (
    "allowed_imports",
    "allowed_networks",
    "start_code",
    "warn_before_min",
    "fullscreen",
)


def _checked(exam: Exam, given: Mapping[str, Any]) -> dict[str, Any]:
    """Return each given field's new stored value, every one checked before any is set."""
    values: dict[str, Any] = {}
    if "allowed_imports" in given:
        values["allowed_imports"] = parse_import_list(given["allowed_imports"])
    if "allowed_networks" in given:
        values["allowed_networks"] = parse_networks(given["allowed_networks"])
    if "start_code" in given:
        code = given["start_code"] or ""
        if code and not code.strip():
            raise UsageError("start_code: must not be blank (give '' for no code)")
        values["start_code_sha256"] = hash_code(code) if code else None
    if "warn_before_min" in given:
        values["warn_before_min"] = parse_warn_before(given["warn_before_min"], exam.duration_min)
    if "fullscreen" in given:
        values["fullscreen"] = parse_fullscreen(given["fullscreen"])
    return values


def _phrase(name: str, value: Any) -> str:
    """What changed, in one phrase (``allowed_imports: numpy``, ``start code removed``)."""
    if name == "start_code_sha256":
        return "start code changed" if value else "start code removed"
    shown = {"allowed_imports": "any (no list)", "allowed_networks": "anywhere"}
    if name == "warn_before_min":
        return f"warn_before_min: {value} min" if value else "warn_before_min: 0 (no warning)"
    return f"{name}: {value or shown[name]}" if name in shown else f"{name}: {value}"


def update_exam(session: Session, exam: Exam, changes: Mapping[str, Any]) -> list[str]:
    """Apply ``changes`` (a field of :data:`UPDATABLE` -> its new value) to ``exam``.

    A field left out, or None, is kept; ``""`` clears a list or the code.
    ``warn_before_min`` is minutes (an int or its text), ``fullscreen`` is
    ``offered`` or ``required``. Every field is checked before any is set,
    so a refused change changes nothing. Returns what changed, one phrase
    each (``allowed_imports: numpy,pandas``, ``start code removed``,
    ``warn_before_min: 10 min``); the caller commits.

    Raises
    ------
    UsageError
        ``body``: no field to change; ``allowed_imports``: a name that is not a
        module name; ``allowed_networks``: an entry that is not a network;
        ``start_code``: blank but not empty; ``warn_before_min``: not a whole
        number from 0 to the exam's ``duration_min``; ``fullscreen``: not
        ``offered`` or ``required``.
    """
    given = {k: v for k, v in changes.items() if k in UPDATABLE and v is not None}
    if not given:
        raise UsageError(f"body: nothing to change: give one of {', '.join(UPDATABLE)}")
    values = _checked(exam, given)
    for name, value in values.items():
        setattr(exam, name, value)
    session.flush()
    return [_phrase(name, value) for name, value in values.items()]
