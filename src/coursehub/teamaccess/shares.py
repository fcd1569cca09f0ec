"""Share each student's server with the course's team group, through the hub's shares API.

Why shares and not RBAC roles: JupyterHub (5.x, 6.x) defines roles in its
configuration only (``c.JupyterHub.load_roles``, read at start-up; the REST
API has no roles endpoint), so a role per course
(``access:servers!group=nbgrader-X`` for the group ``formgrade-X``) would
need a hub restart for each new course. Shares (JupyterHub 5.0, "Sharing
access to user servers", ``/hub/api/shares``) are rows of the hub's database,
granted and revoked at run time by a token with the ``shares`` scope:

* one share per student server, granted to the group ``formgrade-{course_id}``
  (``POST /shares/{student}/`` with ``{"group": ...}``), default scope
  ``access:servers!server={student}/``;
* the hub expands a group's shares into its members' permissions at each
  request (``jupyterhub/scopes.py``, ``get_scopes_for``): a user removed from
  the team group by ``coursehub hub sync`` loses the access at once, and a
  new team member gets it at once, with no share to change;
* a share whose owner is no longer a student of the course is revoked
  (``DELETE /groups/{team}/shared/{student}/``) by :func:`sync_team_shares`.

Nothing here needs a hub restart; the course app's token needs the
``shares`` scope (in the rendered ``coursehub-sync`` role).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

from coursehub.contract import student_group, team_group
from coursehub.hub.hubclient import HubClient, HubError


@dataclass(frozen=True)
class SharePlan:
    """Shares of one course's team group to grant and to revoke (student usernames)."""

    course_id: str
    grant: tuple[str, ...]
    revoke: tuple[str, ...]


@dataclass
class ShareReport:
    """What :func:`apply_share_plan` did: granted, revoked, and errors ``(student, message)``."""

    granted: list[str] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


def plan_shares(course_id: str, students: Iterable[str], shared: Iterable[str]) -> SharePlan:
    """Return the shares to grant (students without one) and revoke (owners no longer students)."""
    want, have = set(students), set(shared)
    return SharePlan(course_id, tuple(sorted(want - have)), tuple(sorted(have - want)))


def _q(name: str) -> str:
    return quote(name, safe="")


def read_shared_owners(client: HubClient, course_id: str) -> set[str]:
    """Return the owners of default servers shared with the course's team group.

    Raises
    ------
    HubError
        404 when the team group does not exist on the hub.
    """
    owners = set()
    for share in client.paginate(f"/groups/{_q(team_group(course_id))}/shared"):
        server = share.get("server") or {}
        if server.get("name", "") == "":
            owners.add(server["user"]["name"])
    return owners


def read_students(client: HubClient, course_id: str) -> list[str]:
    """Return the members of the course's student group on the hub ([] if the group is missing)."""
    group = client.get_group(student_group(course_id))
    return sorted(group.get("users", [])) if group else []


def apply_share_plan(client: HubClient, plan: SharePlan) -> ShareReport:
    """Grant and revoke the shares of ``plan``; a refused request is reported, the rest goes on."""
    report = ShareReport()
    team = team_group(plan.course_id)
    for student in plan.grant:
        try:
            client.request("POST", f"/shares/{_q(student)}/", body={"group": team})
        except HubError as exc:
            report.errors.append((student, f"grant: {exc}"))
        else:
            report.granted.append(student)
    for student in plan.revoke:
        try:
            client.request("DELETE", f"/groups/{_q(team)}/shared/{_q(student)}/")
        except HubError as exc:
            if exc.status != 404:
                report.errors.append((student, f"revoke: {exc}"))
                continue
        report.revoked.append(student)
    return report


def sync_team_shares(client: HubClient, course_id: str) -> ShareReport:
    """Share every student's server of ``course_id`` with its team group, and only those.

    Reads the hub's student group (written by ``coursehub hub sync``) and
    the team group's shares: two requests, then one per change.
    A course whose team group is not on the hub yet gets nothing (empty report).
    """
    if client.get_group(team_group(course_id)) is None:
        return ShareReport()
    plan = plan_shares(
        course_id, read_students(client, course_id), read_shared_owners(client, course_id)
    )
    return apply_share_plan(client, plan)


def read_server_sharers(client: HubClient, username: str) -> list[str]:
    """Return the groups and users with whom ``username``'s default server is shared (sorted)."""
    names = []
    for share in client.paginate(f"/shares/{_q(username)}/"):
        who = share.get("group") or share.get("user") or {}
        if who.get("name"):
            names.append(("group " if share.get("group") else "user ") + who["name"])
    return sorted(names)
