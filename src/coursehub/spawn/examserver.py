"""At spawn: a student whose exam is running in a course gets the exam server for it.

:class:`ExamServers` asks the course app, before the start, whether the user
has a running exam (started, end not reached) in any of their courses, the
one the server starts for first: ``GET /api/v1/courses/<course_id>/exams``, then, for each exam,
``GET .../exams/<assignment>/sittings/<user>`` (the sitting's
``seconds_left``), with the server's own token as the budget check does
(:mod:`coursehub.spawn.budgetcheck`). With one, the start becomes an exam
server (:func:`coursehub.examroom.server.plan_exam_traits`): the exam home
(made, and the exam's notebooks fetched into it, by the hub:
:func:`coursehub.examroom.home.ensure_exam_home`), no terminal, exam kernels
without network, the course's own resource limits.

Every start during the exam is an exam server for it, whatever course the
spawn form asked, with the exam course's resource limits, and without the
weekly budget check (a student over their budget still sits the exam). When
the course app does not answer, the server starts as a course server and the
hub logs why (a course app down must not stop every course).

The exam home belongs to the student's Unix account; on a hub whose servers
all run as the hub's own account (``coursehub demo``, SimpleLocalProcessSpawner:
``hub_owned``) it belongs to the hub's account.
"""

from __future__ import annotations

import json
import os
import pwd
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jupyter_core.paths import ENV_CONFIG_PATH, SYSTEM_CONFIG_PATH
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from coursehub.errors import UsageError
from coursehub.examroom.home import (
    DEFAULT_EXAM_ROOT,
    ensure_exam_home,
    plan_exam_home,
    release_dir,
)
from coursehub.examroom.server import ExamSeat, configured_server_extensions, plan_exam_traits
from coursehub.spawn.jupytertools import EXAM, config_dir

#: Where nbgrader's exchange lives when none is given (nbgrader's ``Exchange.root`` default).
DEFAULT_EXCHANGE_ROOT = "/usr/local/share/nbgrader/exchange"
#: The course app's root URL asked at each start (unset: no exam servers).
URL_VAR = "COURSEHUB_EXAM_URL"
#: Seconds the course app has to answer.
TIMEOUT_S = 10.0

# The admin's values of the non-dict traits an exam server replaces, captured once.
_ADMIN_TRAITS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def admin_traits(spawner: Any) -> dict[str, Any]:
    """Return the spawner's ``args``, ``notebook_dir`` and ``default_url`` as the admin set them."""
    return _ADMIN_TRAITS.setdefault(
        spawner,
        {
            "args": list(spawner.args),
            "notebook_dir": spawner.notebook_dir,
            "default_url": spawner.default_url,
        },
    )


def merge_traits(override: dict[str, Any], exam: dict[str, Any]) -> dict[str, Any]:
    """Return ``override`` with ``exam``'s traits on top, dict traits merged key by key (pure)."""
    merged = dict(override)
    for name, value in exam.items():
        if isinstance(value, dict):
            merged[name] = {**(override.get(name) or {}), **value}
        else:
            merged[name] = value
    return merged


def home_owner(username: str, hub_owned: bool = False) -> tuple[int, int]:
    """Return the ``(uid, gid)`` an exam home belongs to: ``username``'s account, or the hub's.

    Raises
    ------
    KeyError
        ``username`` has no Unix account (and ``hub_owned`` is false).
    """
    if hub_owned:
        return os.getuid(), os.getgid()
    account = pwd.getpwnam(username)
    return account.pw_uid, account.pw_gid


def running_sitting(sitting: dict[str, Any]) -> bool:
    """Whether a sitting (the course app's JSON) is running: started, seconds left."""
    return bool(sitting.get("started_at")) and (sitting.get("seconds_left") or 0) > 0


class ExamServers:
    """Turn a start during the user's running exam into an exam server (module docstring).

    Parameters
    ----------
    base_url
        The course app's root URL.
    exam_root
        The site's exam folder (:mod:`coursehub.examroom.home`).
    exchange_root
        nbgrader's exchange root (the released notebooks).
    hub_addresses
        Addresses an exam server's systemd unit may reach (``IPAddressAllow=``).
    hidden
        Folders an exam kernel must not see (the course homes' root).
    hub_owned
        Exam homes belong to the hub's own account (every server runs as it,
        ``coursehub demo``), not to the student's.
    """

    def __init__(
        self,
        base_url: str,
        exam_root: str = DEFAULT_EXAM_ROOT,
        exchange_root: str = DEFAULT_EXCHANGE_ROOT,
        hub_addresses: tuple[str, ...] = ("localhost",),
        hidden: tuple[str, ...] = (),
        timeout_s: float = TIMEOUT_S,
        hub_owned: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.exam_root = exam_root
        self.exchange_root = exchange_root
        self.hub_addresses = hub_addresses
        self.hidden = hidden
        self.timeout_s = timeout_s
        self.hub_owned = hub_owned

    async def _get(self, path: str, token: str) -> Any:
        url = f"{self.base_url}/api/v1/courses/{path}"
        headers = {"Authorization": f"token {token}"}
        answer = await AsyncHTTPClient().fetch(
            url, headers=headers, request_timeout=self.timeout_s, raise_error=False
        )
        if answer.code == 404:
            return None
        if answer.code != 200:
            raise OSError(f"{url}: HTTP {answer.code}")
        return json.loads(answer.body or b"null")

    async def seat(self, spawner: Any, course_ids: Sequence[str]) -> ExamSeat | None:
        """Return the user's running exam in one of ``course_ids`` (the first found), or None.

        None also when the course app does not answer (logged); a course or a
        sitting it does not know (404: not a student there) is no exam.
        """
        for course_id in course_ids:
            if course_id:
                seat = await self._seat_in(spawner, course_id)
                if seat is not None:
                    return seat
        return None

    async def _seat_in(self, spawner: Any, course_id: str) -> ExamSeat | None:
        user, token = spawner.user.name, spawner.api_token or ""
        try:
            exams = await self._get(f"{quote(course_id)}/exams", token) or []
            for exam in exams.get("exams", []) if isinstance(exams, dict) else exams:
                name = str(exam["assignment"])
                path = f"{quote(course_id)}/exams/{quote(name)}/sittings/{quote(user)}"
                sitting = await self._get(path, token)
                if sitting is not None and running_sitting(sitting):
                    home = plan_exam_home(self.exam_root, course_id, name, user)
                    imports = str(exam.get("allowed_imports") or "")
                    ends = str(sitting.get("ends_at"))
                    return ExamSeat(course_id, name, home, imports, ends, self.base_url)
        except (OSError, HTTPClientError, ValueError, KeyError, TypeError, UsageError) as exc:
            spawner.log.warning("coursehub: %s: exams not checked: %s", spawner._log_name, exc)
        return None

    def apply(
        self, spawner: Any, override: dict[str, Any], kind: str, seat: ExamSeat | None
    ) -> dict[str, Any]:
        """Return ``override`` made an exam server's for ``seat`` (None: the admin's traits).

        Raises
        ------
        tornado.web.HTTPError
            500 when the exam home cannot be made (the exam's notebooks not released).
        """
        admin = admin_traits(spawner)
        if seat is None:
            return {**override, **admin}
        try:
            uid, gid = home_owner(spawner.user.name, self.hub_owned)
            release = release_dir(self.exchange_root, seat.course_id, seat.assignment)
            ensure_exam_home(
                Path(seat.home),
                uid,
                gid,
                release,
                seat.course_id,
                seat.assignment,
            )
        except (KeyError, OSError, UsageError) as exc:
            raise web.HTTPError(
                500, f"exam server of {seat.course_id}/{seat.assignment}: {exc}"
            ) from exc
        config = exam_config(override.get("environment", {}).get("JUPYTER_CONFIG_PATH", ""))
        configured = configured_server_extensions(
            [
                *config["JUPYTER_CONFIG_PATH"].split(os.pathsep),
                *ENV_CONFIG_PATH,
                *SYSTEM_CONFIG_PATH,
            ]
        )
        traits = plan_exam_traits(
            seat, kind, admin["args"], self.hub_addresses, self.hidden, configured
        )
        traits["environment"].update(config)
        spawner.log.info(
            "coursehub: %s starts an exam server (%s/%s, ends %s)",
            spawner._log_name,
            seat.course_id,
            seat.assignment,
            seat.ends_at,
        )
        return merge_traits(override, traits)


def exam_config(config_path: str) -> dict[str, str]:
    """Return an exam server's Jupyter configuration variables (jupyter_core's ``paths``).

    ``JUPYTER_CONFIG_PATH``: coursehub's exam directory
    (:data:`coursehub.spawn.jupytertools.EXAM`), then ``config_path`` (the
    course server's). ``JUPYTER_CONFIG_DIR``, the user's own directory
    (``~/.jupyter`` by default, in the exam home the student writes to), is
    that read-only exam directory too: a configuration file the student
    writes during the exam is never read, even by a reopened server.
    """
    exam = config_dir(EXAM)
    return {
        "JUPYTER_CONFIG_PATH": os.pathsep.join(p for p in (exam, config_path) if p),
        "JUPYTER_CONFIG_DIR": exam,
    }


def exam_servers_from_env(
    environ: Mapping[str, str], hub_owned: bool = False
) -> ExamServers | None:
    """Return the hub's :class:`ExamServers` from its environment (None: no ``COURSEHUB_EXAM_URL``).

    ``hub_owned``: exam homes belong to the hub's own account (:class:`ExamServers`).

    ``COURSEHUB_EXAM_ROOT`` (the exam homes), ``COURSEHUB_GRADING_EXCHANGE``
    (the released notebooks), ``COURSEHUB_EXAM_HUB_ADDRESSES`` (space-separated,
    a systemd unit's ``IPAddressAllow=``), ``COURSEHUB_EXAM_HIDDEN``
    (space-separated folders the exam kernels must not see).
    """
    url = environ.get(URL_VAR, "")
    if not url:
        return None
    return ExamServers(
        url,
        environ.get("COURSEHUB_EXAM_ROOT") or DEFAULT_EXAM_ROOT,
        environ.get("COURSEHUB_GRADING_EXCHANGE") or DEFAULT_EXCHANGE_ROOT,
        tuple((environ.get("COURSEHUB_EXAM_HUB_ADDRESSES") or "localhost").split()),
        tuple((environ.get("COURSEHUB_EXAM_HIDDEN") or "").split()),
        hub_owned=hub_owned,
    )
