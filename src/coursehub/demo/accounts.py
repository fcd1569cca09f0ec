"""What ``coursehub demo`` prints once the hub is up: URL, accounts, password (demo only)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

#: Students listed by name in the banner (the others are summarised).
SHOWN_STUDENTS = 3
#: Banner sections: (role, heading), in the order printed.
SECTIONS = (
    ("admin", "Administrator (hub and course app: years, portals, every course)"),
    ("manager", "Portal manager (creates and archives the portal's courses, names leads)"),
    ("team", "Teaching team (lead, teacher, grader)"),
)


class DemoAccount(NamedTuple):
    """One demo login: ``role`` is admin, manager, lead, teacher, grader or student;
    ``where`` the course_id or portal it applies to ("" for the admin)."""

    username: str
    name: str
    role: str
    where: str


def list_accounts(database_url: str) -> list[DemoAccount]:
    """Return the demo's logins: administrator, portal manager, then course members, team first."""
    from sqlalchemy import select

    from coursehub.catalog.connect import open_catalog
    from coursehub.catalog.db import session_scope
    from coursehub.catalog.models.courses import Course, Membership, Person, Portal, PortalManager
    from coursehub.catalog.readmodel import render_display_name
    from coursehub.demo.seed import DEMO_ADMIN, DEMO_MANAGER

    with open_catalog(database_url) as engine, session_scope(engine) as session:
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
        staff = {
            p.username: render_display_name(p.first_name, p.last_name, p.username)
            for p in session.scalars(
                select(Person).where(Person.username.in_([DEMO_ADMIN[0], DEMO_MANAGER[0]]))
            )
        }
        managers = session.execute(
            select(Person.username, Person.first_name, Person.last_name, Portal.code)
            .join(PortalManager, PortalManager.person_pk == Person.id)
            .join(Portal, Portal.id == PortalManager.portal_pk)
            .order_by(Person.username, Portal.code)
        ).all()
    accounts = [DemoAccount(DEMO_ADMIN[0], staff.get(DEMO_ADMIN[0], DEMO_ADMIN[0]), "admin", "")]
    accounts += [
        DemoAccount(u, render_display_name(first, last, u), "manager", portal)
        for u, first, last, portal in managers
    ] or [  # a catalog seeded before the manager was
        DemoAccount(
            DEMO_MANAGER[0], staff.get(DEMO_MANAGER[0], DEMO_MANAGER[0]), "manager", DEMO_MANAGER[3]
        )
    ]
    accounts += [
        DemoAccount(u, render_display_name(first, last, u), str(role), course)
        for u, first, last, role, course in rows
    ]
    return accounts


def render_accounts(
    accounts: Sequence[DemoAccount], shown_students: int = SHOWN_STUDENTS
) -> list[str]:
    """Return the banner's account lines: a section per role, the first students by name (pure).

    Each person comes once in a section, with all their roles there ("lead,
    mlmeca-2025; teacher, numflu-2025"; "manager of portals INFO, MECA").
    """
    lines: list[str] = []
    for section, heading in SECTIONS:
        chosen: dict[str, list[DemoAccount]] = {}
        for account in accounts:
            if _section(account.role) == section:
                chosen.setdefault(account.username, []).append(account)
        if chosen:
            lines.append(f"  {heading}:")
            lines += [
                f"    {username:<10} {roles[0].name} ({_describe_all(roles)})"
                for username, roles in chosen.items()
            ]
    students = [a for a in accounts if a.role == "student"]
    lines.append(f"  Students ({len(students)}):")
    lines += [f"    {a.username:<10} {a.name} ({a.where})" for a in students[:shown_students]]
    if len(students) > shown_students:
        lines.append(
            f"    ... and {len(students) - shown_students} more (usernames = student numbers)"
        )
    return lines


def _section(role: str) -> str:
    return role if role in ("admin", "manager", "student") else "team"


def _describe_all(accounts: Sequence[DemoAccount]) -> str:
    managed = [a.where for a in accounts if a.role == "manager"]
    if len(managed) > 1:
        return f"manager of portals {', '.join(managed)}"
    return "; ".join(_describe(a) for a in accounts)


def _describe(account: DemoAccount) -> str:
    if account.role == "admin":
        return "admin"
    if account.role == "manager":
        return f"manager of portal {account.where}"
    return f"{account.role}, {account.where}"


def render_banner(url: str, password: str, database_url: str, log_path: Path, report: Any) -> str:
    """Return the start-up text: where to go, who can log in, with which password."""
    lines = [
        "",
        f"coursehub demo is running: {url}/hub/login",
        f"  course app:  {url}/services/coursehub/",
        f"  hub log:     {log_path}",
        f"  hub sync:    {_describe_report(report)}",
        "",
        f"  Password of every account (DEMO ONLY, shared by all users): {password}",
        *render_accounts(list_accounts(database_url)),
        "",
        "Press Ctrl-C to stop the hub, its servers and services (data is kept).",
    ]
    return "\n".join(lines)


def _describe_report(report: Any) -> str:
    if isinstance(report, str):  # a sync still running (coursehub.hub.background)
        return report
    if report.ok:
        return "ok"
    return f"with errors: {report.errors or report.aborted}"
