"""Change an exam once made: its allowed imports, allowed address ranges and start code.

The window and the overrides have their own paths (an override per student or
group, :mod:`coursehub.catalog.examoverrides`; time added live); what
:func:`update_exam` changes is read again at each start and each spawn: a
student who starts after the change meets the new start code and address
ranges, and an exam server started after it gets the new import list
(:mod:`coursehub.spawn.examserver` reads the catalog at spawn); a kernel
already running keeps the list it started with.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from coursehub.catalog.examimports import parse_import_list
from coursehub.catalog.examnetworks import parse_networks
from coursehub.catalog.examtime import hash_code
from coursehub.catalog.models.exams import Exam
from coursehub.errors import UsageError

#: The fields :func:`update_exam` changes; ``""`` clears one (no list, no code).
UPDATABLE = ("allowed_imports", "allowed_networks", "start_code")


def update_exam(session: Session, exam: Exam, changes: Mapping[str, str | None]) -> list[str]:
    """Apply ``changes`` (a field of :data:`UPDATABLE` -> its new text) to ``exam``.

    A field left out, or None, is kept; ``""`` clears it. Returns what changed,
    one phrase each (``allowed_imports: numpy,pandas``, ``start code removed``);
    the caller commits.

    Raises
    ------
    UsageError
        ``body``: no field to change; ``allowed_imports``: a name that is not a
        module name; ``allowed_networks``: an entry that is not a network;
        ``start_code``: blank but not empty.
    """
    given = {k: v for k, v in changes.items() if k in UPDATABLE and v is not None}
    if not given:
        raise UsageError(f"body: nothing to change: give one of {', '.join(UPDATABLE)}")
    done = []
    if "allowed_imports" in given:
        exam.allowed_imports = parse_import_list(given["allowed_imports"])
        done.append(f"allowed_imports: {exam.allowed_imports or 'any (no list)'}")
    if "allowed_networks" in given:
        exam.allowed_networks = parse_networks(given["allowed_networks"])
        done.append(f"allowed_networks: {exam.allowed_networks or 'anywhere'}")
    if "start_code" in given:
        code = given["start_code"] or ""
        if code and not code.strip():
            raise UsageError("start_code: must not be blank (give '' for no code)")
        exam.start_code_sha256 = hash_code(code) if code else None
        done.append("start code changed" if code else "start code removed")
    session.flush()
    return done
