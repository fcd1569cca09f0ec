"""A jupyter_server extension of exam servers: the exam clock's sitting and the browser's events.

An exam server (:func:`coursehub.examroom.server.plan_exam_args`) loads this
module with ``--ServerApp.jpserver_extensions=coursehub.examroom.clock=True``.
It adds two routes under the server's base URL, authenticated as every
jupyter-server API (``tornado.web.authenticated``: the server's owner):

``GET /coursehub/exam/status``
    the student's sitting as the course app has it
    (``GET /api/v1/courses/<course_id>/exams/<assignment>/sittings/<user>``):
    ``course_id``, ``assignment``, ``started_at``, ``ends_at`` (aware UTC ISO
    8601), ``seconds_left`` (seconds, counted down from the course app's
    answer), ``receipt`` (None: nothing submitted), ``warn_before_s``
    (seconds before the end when the clock warns, the exam's
    ``warn_before_min``; 0: no warning), ``fullscreen`` (``offered`` or
    ``required``: the clock covers the workspace until full screen) and
    ``stale`` (true when the course app did not answer and the last answer
    is shown). An answer is reused :data:`CACHE_S` seconds and one call is
    made at a time, so a hundred open tabs make one call.
    502 when the course app never answered.
``POST /coursehub/exam/events``
    ``{"kind": ..., "detail": ...}`` from the exam clock (leaving full screen,
    hiding the tab), forwarded to
    ``POST /api/v1/courses/<course_id>/exams/<assignment>/events``; the
    course app's status and JSON come back as they are.

Once the last answer says the student's time is up, the server refuses
every save through its contents API (a pre-save hook, jupyter-server's
``ContentsManager.register_pre_save_hook``, whose ``HTTPError`` rejects the
save with its message): HTTP 403 naming the end, which JupyterLab shows in
its "File Save Error" dialog (:func:`save_refusal`). Before any answer, or
while time is left, saves go through: a course app that does not answer
never costs a student their work.

The browser names nothing: the exam is the server's (``COURSEHUB_EXAM``,
``<course_id>/<assignment>``, set at spawn), the student is the server's
owner (``JUPYTERHUB_USER``), and the course app takes the identity from the
server's token (``JUPYTERHUB_API_TOKEN``); ``COURSEHUB_EXAM_URL`` is the
course app's root URL. The end is asked again because it moves: a proctor
adds time or ends the student's time (:mod:`coursehub.catalog.exams`). A
server without these variables is no exam server: the routes are not added,
and the JupyterLab side (``labextension/``) shows nothing on a 404.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError


@dataclass(frozen=True)
class ClockConfig:
    """Where the server asks: the course app's root URL, the exam, its student, their token."""

    base_url: str
    token: str = field(repr=False)
    course_id: str
    assignment: str
    username: str

    def sitting_url(self) -> str:
        """The course app's URL of the student's sitting."""
        return f"{self.exam_url()}/sittings/{quote(self.username)}"

    def exam_url(self) -> str:
        """The course app's URL of the exam."""
        course, exam = quote(self.course_id), quote(self.assignment)
        return f"{self.base_url}/api/v1/courses/{course}/exams/{exam}"


#: Routes under the server's base URL.
STATUS_ROUTE = "/coursehub/exam/status"
EVENTS_ROUTE = "/coursehub/exam/events"
#: Seconds an answer of the course app is reused.
CACHE_S = 5.0
#: Minutes before the end when the clock warns, for a course app that does not say
#: (its sitting's ``warn_before_min``, :mod:`coursehub.catalog.examsettings`).
DEFAULT_WARN_BEFORE_MIN = 5
#: Full screen ``offered`` or ``required``, for a course app that does not say.
DEFAULT_FULLSCREEN = "offered"
#: Seconds the course app has to answer.
TIMEOUT_S = 10.0
#: The course app's root URL in the server's environment (the hub's own variable).
URL_VAR = "COURSEHUB_EXAM_URL"
#: ``<course_id>/<assignment>`` of the exam (:data:`coursehub.examroom.server.EXAM_VAR`).
EXAM_VAR = "COURSEHUB_EXAM"
#: Longest body forwarded to the course app, in bytes.
MAX_EVENT_BYTES = 2048


def config_from_env(environ: Mapping[str, str]) -> ClockConfig | None:
    """Return the clock's :class:`ClockConfig` from the server's environment (pure).

    None when one of ``COURSEHUB_EXAM_URL``, ``COURSEHUB_EXAM``
    (``<course_id>/<assignment>``), ``JUPYTERHUB_USER``,
    ``JUPYTERHUB_API_TOKEN`` is missing or malformed: not an exam server.
    """
    course_id, sep, assignment = environ.get(EXAM_VAR, "").partition("/")
    values = (
        environ.get(URL_VAR, ""),
        environ.get("JUPYTERHUB_USER", ""),
        environ.get("JUPYTERHUB_API_TOKEN", ""),
    )
    if not (sep and course_id and assignment and "/" not in assignment and all(values)):
        return None
    url, user, token = values
    return ClockConfig(url.rstrip("/"), token, course_id, assignment, user)


def plan_status(
    config: ClockConfig, sitting: Mapping[str, Any], elapsed_s: float, stale: bool
) -> dict[str, Any]:
    """Return the status JSON of a sitting answered ``elapsed_s`` seconds ago (pure).

    ``seconds_left`` is the course app's, less ``elapsed_s``, never below 0.
    ``warn_before_s`` is the exam's ``warn_before_min`` x 60 and ``fullscreen``
    the exam's, both sent with the sitting by the course app
    (:func:`coursehub.catalog.examjson.exam_clock_json`); a course app that
    leaves them out gets :data:`DEFAULT_WARN_BEFORE_MIN` and ``offered``.
    """
    left = sitting.get("seconds_left")
    warn_min = sitting.get("warn_before_min")
    fullscreen = sitting.get("fullscreen")
    return {
        "course_id": config.course_id,
        "assignment": config.assignment,
        "started_at": sitting.get("started_at"),
        "ends_at": sitting.get("ends_at"),
        "seconds_left": None if left is None else max(0.0, float(left) - elapsed_s),
        "receipt": sitting.get("receipt"),
        "warn_before_s": 60 * (DEFAULT_WARN_BEFORE_MIN if warn_min is None else int(warn_min)),
        "fullscreen": "required" if fullscreen == "required" else DEFAULT_FULLSCREEN,
        "stale": stale,
    }


def save_refusal(sitting: Mapping[str, Any] | None, elapsed_s: float) -> str:
    """Return why a save is refused, "" when it is not (pure).

    ``sitting``: the course app's last answer (None: none yet), received
    ``elapsed_s`` seconds ago. Refused once its ``seconds_left``, less
    ``elapsed_s``, is 0 or below; a sitting not started (``seconds_left``
    None) saves.
    """
    left = None if sitting is None else sitting.get("seconds_left")
    if left is None or float(left) - elapsed_s > 0:
        return ""
    ends = sitting.get("ends_at") if sitting else None
    return (
        f"your exam time ended ({ends or 'time up'}): this save is refused; "
        "the bell submits the work saved before your end"
    )


class ClockSource:
    """The course app's answers for one exam server, each reused :data:`CACHE_S` seconds."""

    def __init__(self, config: ClockConfig, cache_s: float = CACHE_S) -> None:
        self.config = config
        self.cache_s = cache_s
        self.sitting: dict[str, Any] | None = None
        self.fetched_at = 0.0
        self._asking = asyncio.Lock()  # one call to the course app at a time

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.config.token}"}

    async def status(self) -> dict[str, Any] | None:
        """Return the status JSON (:func:`plan_status`); None when the course app never answered."""
        stale = False
        async with self._asking:
            if self.sitting is None or time.monotonic() - self.fetched_at >= self.cache_s:
                try:
                    await self._refresh()
                except (OSError, HTTPClientError):
                    stale = True
        if self.sitting is None:
            return None
        return plan_status(self.config, self.sitting, time.monotonic() - self.fetched_at, stale)

    async def _refresh(self) -> None:
        answer = await AsyncHTTPClient().fetch(
            self.config.sitting_url(),
            headers=self._headers(),
            request_timeout=TIMEOUT_S,
            raise_error=False,
        )
        if answer.code != 200:
            raise OSError(f"{self.config.sitting_url()}: HTTP {answer.code}")
        try:
            sitting = json.loads(answer.body)
        except ValueError as exc:
            raise OSError(f"{self.config.sitting_url()}: not JSON") from exc
        self.sitting, self.fetched_at = sitting, time.monotonic()

    async def forward_event(self, body: bytes) -> tuple[int, bytes]:
        """POST an event's body to the course app; return its status and body (502: no answer)."""
        url = f"{self.config.exam_url()}/events"
        headers = self._headers() | {"Content-Type": "application/json"}
        try:
            answer = await AsyncHTTPClient().fetch(
                url,
                method="POST",
                body=body,
                headers=headers,
                request_timeout=TIMEOUT_S,
                raise_error=False,
            )
        except (OSError, HTTPClientError) as exc:
            return 502, json.dumps({"error": f"the course app did not answer: {exc}"}).encode()
        if answer.code == 599:
            return 502, json.dumps({"error": "the course app did not answer"}).encode()
        return answer.code, answer.body or b"{}"


def _make_handlers(source: ClockSource) -> tuple[type, type]:
    """Return the two route handlers (jupyter_server imported when the extension loads)."""
    from jupyter_server.base.handlers import APIHandler
    from tornado import web

    class StatusHandler(APIHandler):
        """``GET /coursehub/exam/status`` (module docstring)."""

        @web.authenticated
        async def get(self) -> None:
            status = await source.status()
            if status is None:
                self.set_status(502)
                self.finish({"message": "the course app did not answer; the clock tries again"})
                return
            self.finish(status)

    class EventsHandler(APIHandler):
        """``POST /coursehub/exam/events`` (module docstring)."""

        @web.authenticated
        async def post(self) -> None:
            body = self.request.body or b""
            if len(body) > MAX_EVENT_BYTES:
                self.set_status(400)
                self.finish({"error": f"body: at most {MAX_EVENT_BYTES} bytes"})
                return
            code, answer = await source.forward_event(body)
            self.set_status(code)
            self.set_header("Content-Type", "application/json")
            self.finish(answer)

    return StatusHandler, EventsHandler


def _save_hook(source: ClockSource) -> Any:
    """Return the pre-save hook refusing a save after the end (:func:`save_refusal`)."""
    from tornado import web

    def refuse_late_save(model: Any, path: str, **kwargs: Any) -> None:
        why = save_refusal(source.sitting, time.monotonic() - source.fetched_at)
        if why:
            raise web.HTTPError(403, why)

    return refuse_late_save


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """The module is its own extension (jupyter_server ``extension/manager.py``)."""
    return [{"module": "coursehub.examroom.clock"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Add the clock's routes when the server is an exam server (called by jupyter_server)."""
    config = config_from_env(os.environ)
    if config is None:
        serverapp.log.info("coursehub: not an exam server (no %s): no exam clock", URL_VAR)
        return
    from jupyter_server.utils import url_path_join

    source = ClockSource(config)
    status, events = _make_handlers(source)
    serverapp.contents_manager.register_pre_save_hook(_save_hook(source))
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(
        ".*",
        [(url_path_join(base, STATUS_ROUTE), status), (url_path_join(base, EVENTS_ROUTE), events)],
    )
    serverapp.log.info(
        "coursehub: exam clock of %s/%s for %s",
        config.course_id,
        config.assignment,
        config.username,
    )
