"""Archived courses and courses of archived years are read-only, in every page and API call."""

from __future__ import annotations

from flask import g, request

from coursehub.catalog.admin import check_writable
from coursehub.catalog.queries import course_with_year
from coursehub.web.database import get_session

#: Changes still allowed on a read-only course: restore it, copy it to another year.
READ_ONLY_EXEMPT = frozenset(
    {"portals.restore_course", "portals.copy_course", "api_admin.restore", "api_admin.copy"}
)
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def refuse_changes_to_read_only_courses() -> None:
    """Refuse (:class:`~coursehub.catalog.admin.ReadOnlyError`, answered 409 with why and who
    can lift it) any change to an archived course or a course of an archived year: every
    page and API route with a ``course_id`` that writes, but :data:`READ_ONLY_EXEMPT`."""
    course_id = (request.view_args or {}).get("course_id")
    if request.method not in WRITE_METHODS or not course_id:
        return
    if request.endpoint in READ_ONLY_EXEMPT or g.get("identity") is None:
        return
    course = course_with_year(get_session(), course_id)
    if course is not None:
        check_writable(course)
