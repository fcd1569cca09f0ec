"""What ``coursehub demo`` prints once the hub is up: URL, accounts, password (demo only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Students listed by name in the banner (the others are summarised).
SHOWN_STUDENTS = 3


def list_accounts(database_url: str) -> list[tuple[str, str, str, str]]:
    """Return ``(username, display name, role, course_id)`` of every member, team first."""
    from sqlalchemy import select

    from coursehub.catalog.db import make_engine, session_scope
    from coursehub.catalog.models import Course, Membership, Person

    engine = make_engine(database_url)
    try:
        with session_scope(engine) as session:
            rows = session.execute(
                select(
                    Person.username,
                    Person.first_name,
                    Person.last_name,
                    Membership.role,
                    Course.course_id,
                )
                .join(Membership, Membership.person_pk == Person.id)
                .join(Course, Course.id == Membership.course_pk)
                .order_by(Membership.role == "student", Course.course_id, Person.username)
            ).all()
    finally:
        engine.dispose()
    return [(u, f"{first} {last}".strip(), role, course) for u, first, last, role, course in rows]


def render_banner(url: str, password: str, database_url: str, log_path: Path, report: Any) -> str:
    """Return the start-up text: where to go, who can log in, with which password."""
    accounts = list_accounts(database_url)
    team = [a for a in accounts if a[2] != "student"]
    students = [a for a in accounts if a[2] == "student"]
    lines = [
        "",
        f"coursehub demo is running: {url}/hub/login",
        f"  course app:  {url}/services/coursehub/",
        f"  hub log:     {log_path}",
        f"  hub sync:    {_describe_report(report)}",
        "",
        f"  Password of every account (DEMO ONLY, shared by all users): {password}",
        "  Teaching team:",
    ]
    lines += [f"    {u:<10} {name} ({role}, {course})" for u, name, role, course in team]
    lines.append(f"  Students ({len(students)}):")
    lines += [f"    {u:<10} {name} ({course})" for u, name, _, course in students[:SHOWN_STUDENTS]]
    if len(students) > SHOWN_STUDENTS:
        lines.append(
            f"    ... and {len(students) - SHOWN_STUDENTS} more (usernames = student numbers)"
        )
    lines += ["", "Press Ctrl-C to stop the hub, its servers and services (data is kept)."]
    return "\n".join(lines)


def _describe_report(report: Any) -> str:
    if report.ok:
        return "ok"
    return f"with errors: {report.errors or report.aborted}"
