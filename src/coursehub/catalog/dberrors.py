"""Database errors turned into messages that name the broken rule and never a value."""

from __future__ import annotations

import re
from typing import Any


def describe_db_error(exc: Any) -> str:
    """Return what a database error broke, without any value it quotes (no personal data).

    ``"unique rule people.student_number"`` for SQLite's ``UNIQUE constraint
    failed: people.student_number``, ``"unique rule uq_people_student_number"``
    for PostgreSQL's ``duplicate key value violates unique constraint
    "uq_people_student_number"`` (its DETAIL line, which quotes the value, is
    dropped); else the error's class, e.g. ``"DataError"``.
    """
    text = str(exc.orig)
    kind = "unique" if re.search(r"unique|duplicate", text, re.IGNORECASE) else "integrity"
    name = re.search(r'constraint "([A-Za-z0-9_.]+)"|constraint failed: ([A-Za-z0-9_.]+)', text)
    from sqlalchemy.exc import IntegrityError

    if isinstance(exc, IntegrityError):
        return f"{kind} rule {name[1] or name[2]}" if name else f"{kind} rule"
    return type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__
