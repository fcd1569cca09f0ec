"""Errors the catalog raises; all are :class:`coursehub.errors.CoursehubError`.

The CLI prints them as one line (exit status 2); the web app shows the message
to the user. Each message names the object and the field at fault.
"""

from __future__ import annotations

from coursehub.errors import CoursehubError, UsageError


class ValidationError(UsageError):
    """A value is malformed or out of range (bad email, unknown role, negative CPU limit)."""


class NotFoundError(CoursehubError):
    """A course, person, year, portal, group or profile named by the user does not exist."""


class ConflictError(CoursehubError):
    """The change would break a uniqueness rule (a second course with the same ``course_id``)."""


class ForbiddenError(CoursehubError):
    """The user may not make this change (the web app answers 403); the message says who may."""


class IdentityError(ConflictError):
    """A change to a person's name, e-mail or student number that the caller may not make."""


class SchemaError(CoursehubError):
    """The database is empty or its schema is older than this version of coursehub."""


class RosterError(ValidationError):
    """A roster file could not be read; ``problems`` holds every row/column message found."""

    def __init__(self, problems: list[str], source: str = "") -> None:
        self.problems = list(problems)
        shown = self.problems[:20]
        more = len(self.problems) - len(shown)
        text = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        super().__init__(f"roster{' ' + source if source else ''}: {text}")
