"""JSON bodies of the API: pure ``parse_*`` (request -> values) and ``render_*`` (model -> dict).

The shapes are those of ``openapi.yaml`` in this package. A malformed body
raises :class:`PayloadError`, answered ``400 {"error": ..., "fields": {...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coursehub.catalog.models.courses import Course, ResourceProfile
from coursehub.catalog.profiles import profile_json
from coursehub.catalog.readmodel import MemberRow
from coursehub.web.actions import Material, NewCourse
from coursehub.web.rosterflow import RosterRequest


class PayloadError(Exception):
    """A request body with missing or mistyped fields; ``fields`` maps each to its problem."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields
        super().__init__(
            "invalid request body: " + "; ".join(f"{k}: {v}" for k, v in fields.items())
        )


def parse_fields(
    body: Any, required: Mapping[str, type], optional: Mapping[str, type]
) -> dict[str, Any]:
    """Return the known fields of a JSON object, checking presence and types.

    Raises
    ------
    PayloadError
        If ``body`` is not an object, a required field is missing, a field has
        the wrong type, a text field holds a lone surrogate, or an unknown
        field is present.
    """
    if not isinstance(body, dict):
        raise PayloadError({"body": "must be a JSON object"})
    fields: dict[str, str] = {}
    for name in required:
        if name not in body:
            fields[name] = "is required"
    for name, value in body.items():
        kind = required.get(name) or optional.get(name)
        if kind is None:
            fields[name] = "is not a known field"
        elif (value is None and name in required) or (
            value is not None and not isinstance(value, kind)
        ):
            fields[name] = f"must be a {kind.__name__}"
        elif isinstance(value, str) and (surrogate := _lone_surrogate(value)):
            fields[name] = f"holds a lone surrogate ({surrogate}), which is not text"
    if fields:
        raise PayloadError(fields)
    return dict(body)


def _lone_surrogate(text: str) -> str | None:
    """Return ``"U+D800"`` for the first lone surrogate of ``text`` (JSON's ``"\\ud800"``
    decodes to one; no database or UTF-8 encoder accepts it), else None."""
    for char in text:
        if "\ud800" <= char <= "\udfff":
            return f"U+{ord(char):04X}"
    return None


MATERIAL_FIELDS: dict[str, type] = {"git_url": str, "branch": str, "subpath": str}


def parse_material(value: Any) -> Material | None:
    """Return the ``material`` object of a body (None when absent)."""
    if value is None:
        return None
    data = parse_fields(value, {"git_url": str}, MATERIAL_FIELDS)
    return Material(data["git_url"], data.get("branch") or "main", data.get("subpath") or "")


def parse_new_course(body: Any) -> NewCourse:
    """Return the course to create from ``POST /courses``."""
    required = {"code": str, "title": str, "year": str, "portal": str}
    optional = {
        "description": str,
        "profile": str,
        "team_profile": str,
        "lead": str,
        "material": dict,
    }
    data = parse_fields(body, required, optional)
    return NewCourse(
        code=data["code"],
        title=data["title"],
        year=data["year"],
        portal=data["portal"],
        description=data.get("description") or "",
        profile=data.get("profile") or "",
        team_profile=data.get("team_profile") or "",
        lead=data.get("lead") or "",
        material=parse_material(data.get("material")) or Material(),
    )


def parse_course_changes(body: Any) -> tuple[dict[str, str | None], Material | None]:
    """Return the changes and the material of ``PATCH /courses/{course_id}``."""
    optional = {"title": str, "description": str, "portal": str, "material": dict}
    optional |= {"profile": str, "team_profile": str}
    data = parse_fields(body, {}, optional)
    material = parse_material(data.pop("material", None))
    nullable = ("profile", "team_profile")
    return {k: v for k, v in data.items() if v is not None or k in nullable}, material


def parse_new_member(body: Any) -> dict[str, Any]:
    """Return the fields of ``POST /courses/{course_id}/members``."""
    optional = {"role": str, "group": str, "first_name": str, "last_name": str, "email": str}
    return parse_fields(body, {"username": str}, optional)


def parse_roster_request(body: Any) -> tuple[RosterRequest, bool, bool]:
    """Return the roster, ``dry_run`` and ``confirm_identity_changes`` of
    ``POST /courses/{course_id}/roster``."""
    optional = {
        "dry_run": bool,
        "confirm_identity_changes": bool,
        "mode": str,
        "group": str,
        "username_rule": str,
    }
    data = parse_fields(body, {"csv": str}, optional)
    req = RosterRequest(
        data=data["csv"].encode("utf-8"),
        mode=data.get("mode") or "add",
        group=data.get("group") or None,
        username_rule=data.get("username_rule") or "student_id",
    )
    return req, bool(data.get("dry_run")), bool(data.get("confirm_identity_changes"))


def render_profile(profile: ResourceProfile | None) -> dict[str, Any] | None:
    """Return a profile's limits (``mem_limit`` in bytes)."""
    return None if profile is None else profile_json(profile)


def render_course(course: Course) -> dict[str, Any]:
    """Return a course's summary, as listed by ``GET /courses``."""
    return {
        "course_id": course.course_id,
        "code": course.code,
        "title": course.title,
        "year": course.year.label,
        "portal": course.portal.code,
        "archived": course.archived,
    }


def render_member(member: MemberRow) -> dict[str, Any]:
    """Return a member of a course: username, names, e-mail, student number, role, group
    (None: no group)."""
    return {
        "username": member.username,
        "first_name": member.first_name,
        "last_name": member.last_name,
        "email": member.email,
        "student_number": member.student_number,
        "role": member.role.value,
        "group": member.group_name or None,
    }
