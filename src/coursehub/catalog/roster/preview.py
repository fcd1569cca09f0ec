"""The text preview of a roster plan (pure): what ``--dry-run`` and the web preview show.

One line per change: ``+ row R: ...`` a student to add, ``~ row R: ...``
an update (and, with ``old -> new``, an existing person's identity change),
``! row R: ... not applied: ...`` an identity change the importer may not
make, ``- username ...`` a removal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from coursehub.catalog.roster.parse import RosterRow
    from coursehub.catalog.roster.plan import IdentityChange, RosterPlan, RosterUpdate

#: What a field reads as in the web preview.
FIELD_LABELS = {
    "first_name": "first name",
    "last_name": "last name",
    "email": "e-mail",
    "student_number": "student number",
    "group": "group",
}


class FieldChange(NamedTuple):
    """One changed field of a student already in the course: ``old -> new``.

    ``old`` is None when it is empty or not shown to the importer (``shown`` False).
    """

    field: str
    old: str | None
    new: str | None
    shown: bool = True

    @property
    def label(self) -> str:
        """The field as people read it ("last name", "e-mail")."""
        return FIELD_LABELS.get(self.field, self.field.replace("_", " "))


def plan_update_changes(
    plan: RosterPlan, old_groups: Mapping[str, str | None]
) -> dict[int, list[FieldChange]]:
    """Return ``row -> [FieldChange, ...]`` for each update of ``plan`` (pure).

    Identity fields take their old values from the plan's identity changes;
    the group from ``old_groups`` (username -> the student's group now, "" or
    None without one).
    """
    by_row = {c.row: c for c in plan.identity_changes}
    return {u.row.row: _update_changes(u, by_row.get(u.row.row), old_groups) for u in plan.updates}


def _update_changes(
    update: RosterUpdate, identity: IdentityChange | None, old_groups: Mapping[str, str | None]
) -> list[FieldChange]:
    olds = {name: (old, new) for name, old, new in (identity.changes if identity else ())}
    shown = identity.old_shown if identity else True
    changes = []
    for name in update.fields:
        if name == "group":
            changes.append(
                FieldChange(name, old_groups.get(update.row.username) or None, update.row.group)
            )
        else:
            old, new = olds.get(name, (None, getattr(update.row, name, None)))
            changes.append(FieldChange(name, old, new, shown))
    return changes


def render_plan(plan: RosterPlan) -> str:
    """Return the preview of a plan as text, one line per change (pure)."""
    head = f"course {plan.course_id}, mode {plan.mode}" + (
        f", group {plan.group}" if plan.group else ""
    )
    lines = [
        head,
        f"{len(plan.additions)} to add, {len(plan.updates)} to update, "
        f"{len(plan.removals)} to remove, {plan.unchanged} unchanged",
    ]
    if plan.identity_changes:
        applied = sum(1 for c in plan.identity_changes if c.applied)
        lines.append(
            f"existing people renamed or re-mailed: {applied} to confirm (~), "
            f"{len(plan.identity_changes) - applied} not applied (!)"
        )
    if plan.new_groups:
        lines.append(f"new groups: {', '.join(plan.new_groups)}")
    lines += [f"+ row {r.row}: {_describe(r)}" for r in plan.additions]
    lines += [
        f"~ row {u.row.row}: {_describe(u.row)} ({', '.join(u.fields)})" for u in plan.updates
    ]
    lines += [f"- {m.username} {m.first_name} {m.last_name}".rstrip() for m in plan.removals]
    lines += [render_identity_change(plan.course_id, c) for c in plan.identity_changes]
    return "\n".join(lines) + "\n"


def render_identity_change(course_id: str, change: IdentityChange) -> str:
    """Return ``~ row 2: p2501002 last_name 'Moreau' -> 'Moreau-Durand'`` (applied) or the
    same line starting ``!`` and saying why it is not applied (pure); the stored value of
    someone outside the course reads ``(not shown)``."""
    text = ", ".join(
        f"{name} {_quoted(old) if change.old_shown else '(not shown)'} -> {_quoted(new)}"
        for name, old, new in change.changes
    )
    if change.applied:
        return f"~ row {change.row}: {change.username} {text}"
    return (
        f"! row {change.row}: {change.username} {text} (not applied: {change.username} is not "
        f"only in {course_id}; only a hub admin may change their name, e-mail or student number)"
    )


def _quoted(value: str | None) -> str:
    return "(none)" if not value else repr(value)


def _describe(row: RosterRow) -> str:
    text = f"{row.username} {row.first_name} {row.last_name}"
    return (
        text + (f" <{row.email}>" if row.email else "") + (f" [{row.group}]" if row.group else "")
    )
