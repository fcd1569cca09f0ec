"""The spawn-time budget rule: a student over the week's budget of a course is not started.

:class:`BudgetCheck` asks the course app (:mod:`coursehub.meter.budgetclient`)
for the user's week in the course the server would run under, with the
server's own token (``spawner.api_token``, set by JupyterHub before
``apply_user_options``, ``jupyterhub/user.py``), and refuses with 403 and the
one line of :func:`coursehub.meter.budget.refusal`. It is asynchronous
(tornado's ``AsyncHTTPClient``): the course app checks that token with the
hub, which must stay free to answer. A GPU budget used up refuses only a
server with GPUs. When the course app does not answer, the server starts and
the hub logs why. A server already running is never stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from coursehub.meter.budget import BudgetStatus, refusal
from coursehub.meter.budgetclient import TIMEOUT_S, BudgetUnavailableError, read_answer, week_url
from coursehub.spawn.profiles import CourseChoice


def course_of_start(choices: Sequence[CourseChoice], requested: str | None) -> str:
    """Return the course a start runs under: the one requested if it is the user's, else the
    default choice's ("" without courses), as :func:`coursehub.spawn.profiles.choose_profile`."""
    for choice in choices:
        if choice.key == (requested or ""):
            return choice.course_id
    return choices[0].course_id if choices else ""


class BudgetCheck:
    """Refuse a start over the week's budget (``COURSEHUB_BUDGET_URL`` is ``base_url``)."""

    def __init__(self, base_url: str, timeout_s: float = TIMEOUT_S) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s

    async def week(self, course_id: str, username: str, token: str) -> BudgetStatus | None:
        """Return the user's week in ``course_id`` (None: a course the app does not know).

        Raises
        ------
        BudgetUnavailableError
            The app did not answer, or not with a week.
        """
        url = week_url(self.base_url, course_id, username)
        headers = {"Authorization": f"token {token}"}
        try:
            answer = await AsyncHTTPClient().fetch(
                url, headers=headers, request_timeout=self.timeout_s, raise_error=False
            )
        except (OSError, HTTPClientError) as exc:
            raise BudgetUnavailableError(f"{url}: {exc}") from None
        if answer.code == 599:  # tornado: no HTTP answer (time-out, refused connection)
            raise BudgetUnavailableError(f"{url}: {answer.error}")
        return read_answer(url, answer.code, answer.body or b"")

    async def check(self, spawner: Any, course_id: str, gpus: int) -> None:
        """Raise 403 with the budget's line when the user's week in ``course_id`` is spent.

        Raises
        ------
        tornado.web.HTTPError
            403, the message naming the budget, the hours used, the reset and whom to ask.
        """
        if not course_id:
            return
        try:
            week = await self.week(course_id, spawner.user.name, spawner.api_token or "")
        except BudgetUnavailableError as exc:
            spawner.log.warning("coursehub: %s: budget not checked: %s", spawner._log_name, exc)
            return
        line = None if week is None else refusal(week, gpus)
        if line is not None:
            spawner.log.info("coursehub: %s not started: %s", spawner._log_name, line)
            raise web.HTTPError(403, line)
