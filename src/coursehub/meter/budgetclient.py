"""Asking the course app for a student's week: the hub at spawn, the runner before a job.

Both ask the same call of the course app's API, ``GET
/api/v1/courses/{course_id}/budget/students/{username}``
(:mod:`coursehub.web.api.budgets`), with the user's own hub token (the
server's ``$JUPYTERHUB_API_TOKEN``; JupyterHub documentation, "Authenticating
a service", token scopes), so that the course app reads the figures it shows
on the student's page. The base URL is ``$COURSEHUB_BUDGET_URL`` (the course
app's root, e.g. ``http://127.0.0.1:10101/services/coursehub/``); unset: no
budget is checked. An answer that cannot be had (the app down, a time-out) is
:class:`BudgetUnavailableError`: the callers then start the server or job and log
it, so that an outage of the course app stops nobody.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import quote

from coursehub.meter.budget import BudgetStatus, status_from_json

#: The variable naming the course app's root URL for budget questions.
URL_VAR = "COURSEHUB_BUDGET_URL"
#: Seconds one question may take.
TIMEOUT_S = 5.0


class BudgetUnavailableError(Exception):
    """The course app gave no usable answer (one line: where and why)."""


def week_url(base_url: str, course_id: str, username: str) -> str:
    """Return the URL of ``username``'s week in ``course_id`` below the app's ``base_url``."""
    course, user = quote(course_id, safe=""), quote(username, safe="")
    return f"{base_url.rstrip('/')}/api/v1/courses/{course}/budget/students/{user}"


def read_answer(url: str, status: int, body: bytes) -> BudgetStatus | None:
    """Return the week in an answer; None for 404 (a course the app does not know).

    Raises
    ------
    BudgetUnavailableError
        Any other status, or a body that is not a week.
    """
    if status == 404:
        return None
    if status != 200:
        raise BudgetUnavailableError(f"{url}: HTTP {status}")
    try:
        return status_from_json(json.loads(body))
    except ValueError as exc:
        raise BudgetUnavailableError(f"{url}: {exc}") from None


def fetch_week(
    base_url: str, course_id: str, username: str, token: str, timeout_s: float = TIMEOUT_S
) -> BudgetStatus | None:
    """Ask the course app for ``username``'s week (blocking; the runner's side).

    Raises
    ------
    BudgetUnavailableError
        No answer within ``timeout_s``, or an answer :func:`read_answer` refuses.
    """
    url = week_url(base_url, course_id, username)
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return read_answer(url, answer.status, answer.read())
    except urllib.error.HTTPError as exc:
        return read_answer(url, exc.code, b"")
    except (OSError, ValueError) as exc:
        raise BudgetUnavailableError(f"{url}: {exc}") from None
