"""A proctor reopens a student's exam server after a crash, through the hub.

The student's time is the catalog's and is not touched: a crashed server, a
closed browser or another computer never moves their end
(:func:`coursehub.catalog.examproctor.check_reopen` refuses a student who has
not started, was submitted at the bell, or whose end has passed). On the hub,
:func:`restart_exam_server` clears what is left of the student's servers
(JupyterHub's ``DELETE /users/{name}/server``, as a new exam start does:
:func:`coursehub.web.api.exams.stop_student_servers`), waits for the stop,
then starts their default server (``POST /users/{name}/server``); the spawn
makes it the exam server again (:mod:`coursehub.spawn.examserver`), in the
exam home as the student left it. The reopen is recorded as an exam event
(``server-reopened``: who reopened it, what the hub did).

The caller's hub token needs ``admin:servers`` (start and stop a user's
servers, read their state) and ``read:users``. Without a hub the reopen
is still recorded, and says that the student starts their server again
themselves (what the hub's own page offers once the crashed server is gone).
Used by the proctor's page (:mod:`coursehub.web.views.exams`), the JSON API
(:mod:`coursehub.web.api.exams`), both with the course app's hub client
(:func:`coursehub.web.api.exams.reopen_server`), and ``coursehub exam reopen``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from coursehub.catalog.examproctor import check_reopen, note_reopen
from coursehub.errors import UsageError

#: Seconds the hub has to finish stopping what is left of a crashed server.
STOP_WAIT_S = 15.0
#: Seconds between two looks at the student's servers while they stop.
POLL_S = 0.25
#: What a reopen without a hub says.
NO_HUB = "no hub configured: the student starts their server again"


@dataclass(frozen=True)
class Reopened:
    """A reopened exam server: the sitting (its end unchanged) and what the hub did."""

    sitting: Any
    outcome: str


def restart_exam_server(client: Any, username: str, wait_s: float = STOP_WAIT_S) -> str:
    """Stop what is left of ``username``'s servers on the hub, then start their default one.

    ``client`` is a :class:`coursehub.hub.hubclient.HubClient`; ``wait_s``:
    seconds the stop may take (then the server is left stopped, for the
    student to start). Returns what the hub did, as a phrase
    (``"server started"``, ``"server starting"``, or stopped only).

    Raises
    ------
    UsageError
        ``username``: the hub has no such user.
    coursehub.hub.hubclient.HubError, coursehub.hub.hubclient.HubUnreachableError
        The hub refused a request or did not answer.
    """
    if client.find_user(username) is None:
        raise UsageError(f"username: the hub has no user {username}")
    stopped = client.stop_servers(username)
    deadline = time.monotonic() + wait_s
    while (client.find_user(username) or {}).get("servers"):
        if time.monotonic() >= deadline:
            return (
                f"the hub is still stopping the old server after {wait_s:g} s: "
                "the student starts it again once it has stopped"
            )
        time.sleep(POLL_S)
    status = client.start_server(username)
    state = "server started" if status == 201 else "server starting"
    return f"{state} (old server stopped)" if stopped else state


def reopen_exam(
    session: Any,
    course: Any,
    exam: Any,
    username: str,
    reopened_by: str,
    now: datetime,
    client: Any | None,
) -> Reopened:
    """Reopen ``username``'s exam server at ``now`` (aware UTC) and record who did it.

    The catalog is checked first (nothing is asked of the hub for a refused
    student); ``client`` None: no hub (:data:`NO_HUB`). Nothing is committed:
    the caller's transaction does.

    Raises
    ------
    UsageError
        ``username``: not a student of the course, not started, submitted at
        the bell, time over (:func:`coursehub.catalog.examproctor.check_reopen`),
        or unknown to the hub.
    coursehub.errors.CoursehubError
        The hub refused or did not answer (nothing is recorded).
    """
    sitting = check_reopen(session, course, exam, username, now)
    outcome = NO_HUB if client is None else restart_exam_server(client, sitting.username)
    note_reopen(session, course, exam, sitting.username, reopened_by, outcome, now)
    return Reopened(sitting, outcome)
