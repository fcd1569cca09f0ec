"""The runner's budget admission: a job from a server over the week's budget is not started.

Inside a server of the cgroup spawners the hub sets ``COURSEHUB_BUDGET_URL``
(when the site checks budgets), ``COURSEHUB_COURSE_ID``, ``JUPYTERHUB_USER``
and ``JUPYTERHUB_API_TOKEN``; :func:`check_budget` asks the course app for
the user's week with them (:func:`coursehub.meter.budgetclient.fetch_week`,
the figures of the student's page) and refuses with the one line of
:func:`coursehub.meter.budget.refusal` before anything starts. Outside such a
server (one of those variables unset) nothing is checked; when the course
app does not answer, the job starts and a warning is logged. A job already
running is never stopped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from coursehub.errors import UsageError
from coursehub.meter.budget import refusal
from coursehub.meter.budgetclient import URL_VAR, BudgetUnavailableError, fetch_week
from coursehub.meter.sampler import COURSE_VAR

log = logging.getLogger(__name__)


def check_budget(gpus: int = 0, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a job of ``gpus`` GPUs when the user's week in the server's course is spent.

    Raises
    ------
    UsageError
        The budget's line: the budget, the hours used this week, the reset, whom to ask.
    """
    env = os.environ if environ is None else environ
    base, course_id = env.get(URL_VAR, ""), env.get(COURSE_VAR, "")
    user, token = env.get("JUPYTERHUB_USER", ""), env.get("JUPYTERHUB_API_TOKEN", "")
    if not (base and course_id and user and token):
        return
    try:
        week = fetch_week(base, course_id, user, token)
    except BudgetUnavailableError as exc:
        log.warning("coursehub run: budget not checked: %s", exc)
        return
    line = None if week is None else refusal(week, gpus)
    if line is not None:
        raise UsageError(line)
