"""Roster import through the web: upload -> preview -> confirm, nothing written before confirm.

The preview page carries the uploaded file back to the server in a hidden
field, signed with the app's ``SECRET_KEY`` (:mod:`itsdangerous`) together
with the course, the options and a digest of the previewed plan. On confirm
the file is parsed and planned again; if the plan differs from the one the
user saw (the course changed meanwhile), nothing is applied and the new
preview is shown instead.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy.orm import Session

from coursehub.catalog.models.courses import Course
from coursehub.catalog.roster.parse import parse_roster
from coursehub.catalog.roster.plan import RosterPlan, plan_roster
from coursehub.catalog.roster.preview import render_plan
from coursehub.errors import UsageError

SALT = "coursehub.roster-preview"


@dataclass(frozen=True)
class RosterRequest:
    """An uploaded roster and how to import it (see ``plan_roster``)."""

    data: bytes
    mode: str = "add"
    group: str | None = None
    username_rule: str = "student_id"


def plan_import(
    session: Session, course: Course, req: RosterRequest, admin: bool = False
) -> RosterPlan:
    """Parse the file and plan its import into ``course`` (reads, never writes).

    ``admin``: the importer is a hub admin, who may change anyone's identity
    (:func:`coursehub.catalog.roster.plan.plan_changes`).

    Raises
    ------
    coursehub.catalog.errors.RosterError
        With every row/column problem of the file or the plan.
    """
    rows = parse_roster(req.data, req.username_rule)
    return plan_roster(session, course, rows, req.mode, req.group or None, admin)


def plan_digest(plan: RosterPlan) -> str:
    """Return a SHA-256 hex digest of the plan's preview text: equal digests, equal changes."""
    return hashlib.sha256(render_plan(plan).encode("utf-8")).hexdigest()


def sign_preview(secret_key: str, course_id: str, req: RosterRequest, digest: str) -> str:
    """Return the signed hidden-field value that brings the previewed upload back on confirm."""
    payload = {
        "course_id": course_id,
        "data": base64.b64encode(req.data).decode("ascii"),
        "mode": req.mode,
        "group": req.group,
        "username_rule": req.username_rule,
        "digest": digest,
    }
    return URLSafeSerializer(secret_key, salt=SALT).dumps(payload)


def read_preview(secret_key: str, course_id: str, token: str) -> tuple[RosterRequest, str]:
    """Return the upload and plan digest signed by :func:`sign_preview` for ``course_id``.

    Raises
    ------
    UsageError
        If the value was altered, signed by another key, or is for another course.
    """
    try:
        payload: dict[str, Any] = URLSafeSerializer(secret_key, salt=SALT).loads(token)
    except BadSignature:
        raise UsageError(
            "the roster preview is not valid any more: upload the file again"
        ) from None
    if payload.get("course_id") != course_id:
        raise UsageError("the roster preview belongs to another course: upload the file again")
    req = RosterRequest(
        data=base64.b64decode(payload["data"]),
        mode=payload["mode"],
        group=payload["group"],
        username_rule=payload["username_rule"],
    )
    return req, str(payload["digest"])


def render_plan_json(plan: RosterPlan) -> dict[str, Any]:
    """Return a plan as the API shows it: rows to add, update, remove, and counts."""
    return {
        "course_id": plan.course_id,
        "mode": plan.mode,
        "additions": [_row(r) for r in plan.additions],
        "updates": [_row(u.row) | {"fields": list(u.fields)} for u in plan.updates],
        "removals": [
            {"username": m.username, "first_name": m.first_name, "last_name": m.last_name}
            for m in plan.removals
        ],
        "unchanged": plan.unchanged,
        "new_groups": list(plan.new_groups),
        "identity_changes": [
            {
                "row": c.row,
                "username": c.username,
                "changes": [{"field": f, "old": old, "new": new} for f, old, new in c.changes],
                "applied": c.applied,
                "old_shown": c.old_shown,
            }
            for c in plan.identity_changes
        ],
    }


def _row(row: Any) -> dict[str, Any]:
    names = ("row", "username", "student_number", "last_name", "first_name", "email", "group")
    return {name: getattr(row, name) for name in names}
