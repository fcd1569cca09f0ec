"""The students' servers of a course as the team's page shows them (read from the hub)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from coursehub.hub.hubclient import HubClient


@dataclass(frozen=True)
class ServerRow:
    """One student's default server.

    Attributes
    ----------
    username
        The student.
    state
        ``"running"``, ``"starting"``, ``"stopping"``, ``"stopped"`` or
        ``"no hub account"``.
    last_activity
        The hub's last activity of the server (else of the user), or None.
    url
        Path of the running server on the hub (``/user/<name>/``), else None.
    course
        Course whose profile the server started with (``user_options``), if known.
    """

    username: str
    state: str
    last_activity: datetime | None
    url: str | None
    course: str | None = None


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def plan_server_rows(
    students: Iterable[str], users: Mapping[str, Mapping[str, Any]]
) -> list[ServerRow]:
    """Return one row per student from the hub's user models ``users`` (by name) (pure).

    Running servers first (most recent activity first), then the others by name.
    """
    rows = []
    for name in sorted(set(students)):
        user = users.get(name)
        if user is None:
            rows.append(ServerRow(name, "no hub account", None, None))
            continue
        server = (user.get("servers") or {}).get("")
        if not server:
            rows.append(ServerRow(name, "stopped", _when(user.get("last_activity")), None))
            continue
        pending = server.get("pending")
        state = "running" if server.get("ready") else f"{pending}ing" if pending else "stopped"
        state = {"spawning": "starting", "stoping": "stopping"}.get(state, state)
        options = server.get("user_options") or {}
        rows.append(
            ServerRow(
                name,
                state,
                _when(server.get("last_activity")) or _when(user.get("last_activity")),
                server.get("url") if server.get("ready") else None,
                str(options["course"]) if options.get("course") else None,
            )
        )
    running = sorted(
        (r for r in rows if r.state == "running"),
        key=lambda r: r.last_activity.timestamp() if r.last_activity else 0.0,
        reverse=True,
    )
    return running + [r for r in rows if r.state != "running"]


def read_server_rows(client: HubClient, students: Iterable[str]) -> list[ServerRow]:
    """Return the rows of ``students``: the hub's user list, read by pages of 200."""
    wanted = set(students)
    users = {u["name"]: u for u in client.paginate("/users") if u.get("name") in wanted}
    return plan_server_rows(wanted, users)
