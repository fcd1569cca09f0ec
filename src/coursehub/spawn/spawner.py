"""Course profiles at spawn time: hooks that work with any JupyterHub spawner class.

:class:`CourseProfiles` plugs into the base ``Spawner`` configuration, so the
same four lines serve SystemdSpawner, the local cgroup spawner of
:mod:`coursehub.spawn.cgroupspawner`, batchspawner's SlurmSpawner and
KubeSpawner (JupyterHub >= 5.3 for ``apply_user_options``)::

    from coursehub.spawn.spawner import CourseProfiles
    profiles = CourseProfiles(kind="systemd", state_path="/srv/jupyterhub/coursehub-gpus.json")
    c.Spawner.options_form = profiles.options_form
    c.Spawner.options_from_form = profiles.options_from_form
    c.Spawner.apply_user_options = profiles.apply
    c.Spawner.post_stop_hook = profiles.release

JupyterHub calls ``apply_user_options`` after ``group_overrides`` and before
``pre_spawn_hook`` and ``start`` (``jupyterhub/user.py``, ``User.spawn``).

Profile choice: the user's course groups and their ``profile`` property
(written by ``coursehub hub sync``) are read from ``spawner.user.groups``; a
user in several courses picks one on the spawn page (the form appears only
with two choices or more), the most generous being the default. A user in
no course sees it on the spawn page (a notice, see :func:`render_no_course_form`)
and, as the site chooses (``no_course``), starts with ``default_profile``
(``"default"``) or is refused with that message (``"refuse"``). A stored or
API-given ``course`` that is not one of the user's courses is ignored
(logged), never honoured.

GPU assignment (``local`` and ``systemd`` only; Slurm and Kubernetes assign
their own): each server gets the least-loaded GPUs that still have room
(``jobs_per_gpu``). Assignments live in a small JSON file (``state_path``,
next to the hub's database) updated under an exclusive ``flock`` and replaced
atomically, so they survive a hub restart; ``release`` (the
``post_stop_hook``) frees them when the server stops. Entries are keyed
``{hub_id}:{user}/{server}`` (:mod:`coursehub.spawn.identity`), so hubs of one
host may share one file without taking each other's GPUs back.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tornado import web

from coursehub.contract import DEFAULT_PROFILE, NO_COURSE_CHOICES, SPAWNER_KINDS, CourseProfile
from coursehub.errors import UsageError
from coursehub.meter.budgetclient import URL_VAR as BUDGET_URL_VAR
from coursehub.meter.sampler import COURSE_VAR
from coursehub.resources.gpus import gpu_inventory
from coursehub.spawn.budgetcheck import BudgetCheck, course_of_start
from coursehub.spawn.busyactivity import GPU_IDLE_VAR
from coursehub.spawn.examserver import ExamServers
from coursehub.spawn.gpustate import GpuAssignments
from coursehub.spawn.identity import check_hub_id, hub_id_from_config
from coursehub.spawn.jupytertools import plan_config_path, plan_tools
from coursehub.spawn.material import apply_material
from coursehub.spawn.profiles import (
    NO_COURSE_REFUSED,
    CourseChoice,
    choose_profile,
    parse_options_form,
    plan_choices,
    render_no_course_form,
    render_options_form,
    spawner_override,
)

__all__ = [
    "CourseProfiles",
    "chain_hooks",
    "plan_user_options",
    "record_course",
    "server_key",
]

#: Default GPU state file, relative to the hub's working directory (where jupyterhub.sqlite is).
DEFAULT_STATE_PATH = "coursehub-gpus.json"

# Admin-configured values of dict traits, captured before the first override,
# so that a second spawn starts again from the admin's values.
_BASELINES: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()


def server_key(spawner: Any, hub_id: str | None = None) -> str:
    """Return ``"{hub_id}:{user}/{server}"`` (server "" for the default server).

    ``hub_id`` defaults to the spawner's own ``hub_id`` trait (local cgroup
    spawner), else to the hub id of its config (:func:`hub_id_from_config`).
    """
    hub = hub_id or getattr(spawner, "hub_id", None) or hub_id_from_config(spawner.config)
    return f"{hub}:{spawner.user.name}/{spawner.name or ''}"


def legacy_server_key(spawner: Any) -> str:
    """Return the key of the same server in state files written before hub ids (``user/server``)."""
    return f"{spawner.user.name}/{spawner.name or ''}"


def apply_override(spawner: Any, override: Mapping[str, Any]) -> None:
    """Set the traits of ``override`` on ``spawner``.

    Dict traits (``environment``, ``unit_extra_properties``...) become the
    admin's configured dict updated with the override, so that nothing of a
    previous spawn's profile lingers; other traits are replaced.
    """
    baselines = _BASELINES.setdefault(spawner, {})
    for name, value in override.items():
        current = getattr(spawner, name, None)
        if isinstance(value, dict) and (isinstance(current, dict) or name in baselines):
            base = baselines.setdefault(name, dict(current or {}))
            setattr(spawner, name, {**base, **value})
        else:
            setattr(spawner, name, value)


def admin_environment(spawner: Any) -> dict[str, Any]:
    """Return the spawner's environment as the admin configured it (before any profile)."""
    return dict(_BASELINES.get(spawner, {}).get("environment", spawner.environment))


class CourseProfiles:
    """Spawner hooks that start each server under one of its user's course profiles.

    Parameters
    ----------
    kind
        Spawner kind (:data:`coursehub.contract.SPAWNER_KINDS`).
    default_profile
        Profile of a user in no course with a profile.
    gpu_ids
        GPU indices of this machine; None: ask NVML at the first GPU request
        (:func:`coursehub.resources.gpus.gpu_inventory`). Used by ``local`` and
        ``systemd`` only.
    state_path
        JSON file of the GPU assignments (see :class:`GpuAssignments`).
    no_course
        A user in no course: ``"default"`` starts with ``default_profile``,
        ``"refuse"`` starts nothing (403); either way the spawn page says why.
    hub_id
        This hub's id in the GPU state keys; None: the spawner's own
        (:func:`server_key`).
    gpu_idle_s
        A server whose profile has GPUs stops after this many seconds without
        activity (``COURSEHUB_GPU_IDLE_S``, read by
        :mod:`coursehub.spawn.busyactivity`); 0: only the hub's idle culler.
    budget_url
        The course app's root URL, asked for the user's weekly budget before
        each start (:mod:`coursehub.spawn.budgetcheck`) and given to the server
        as ``COURSEHUB_BUDGET_URL`` for its runner jobs; None:
        ``$COURSEHUB_BUDGET_URL`` of the hub, unset or "": no budget check.
    exams
        Asks the course app for the user's running exam before each start
        and makes that start an exam server (:mod:`coursehub.spawn.examserver`);
        None: no exam servers.

    Raises
    ------
    UsageError
        If ``kind`` or ``no_course`` is unknown, or ``hub_id`` malformed.
    """

    def __init__(
        self,
        kind: str,
        default_profile: CourseProfile = DEFAULT_PROFILE,
        gpu_ids: Sequence[int] | None = None,
        state_path: str | os.PathLike[str] = DEFAULT_STATE_PATH,
        no_course: str = "default",
        hub_id: str | None = None,
        gpu_idle_s: int = 0,
        budget_url: str | None = None,
        exams: ExamServers | None = None,
    ) -> None:
        if kind not in SPAWNER_KINDS:
            raise UsageError(f"unknown spawner kind {kind!r}: choose one of {SPAWNER_KINDS}")
        if no_course not in NO_COURSE_CHOICES:
            raise UsageError(f"no_course must be one of {NO_COURSE_CHOICES}, got {no_course!r}")
        self.kind = kind
        self.default_profile = default_profile
        self.no_course = no_course
        self.hub_id = check_hub_id(hub_id) if hub_id else None
        self.gpu_idle_s = gpu_idle_s
        self._gpu_ids = None if gpu_ids is None else list(gpu_ids)
        self.gpus = GpuAssignments(state_path)
        url = os.environ.get(BUDGET_URL_VAR, "") if budget_url is None else budget_url
        self.budget = BudgetCheck(url) if url else None
        self.exams = exams

    def gpu_ids(self) -> list[int]:
        """Return this machine's GPU indices (NVML, asked once, when none were given)."""
        if self._gpu_ids is None:
            self._gpu_ids = [gpu.index for gpu in gpu_inventory()]
        return self._gpu_ids

    def choices(self, spawner: Any) -> list[CourseChoice]:
        """Return the profiles the spawner's user may choose, most generous first."""
        groups = [(group.name, group.properties or {}) for group in spawner.user.groups]
        try:
            return plan_choices(groups)
        except UsageError as exc:
            raise web.HTTPError(500, f"course profile misconfigured: {exc}") from exc

    def options_form(self, spawner: Any) -> str:
        """``Spawner.options_form``: a course picker (2+ courses), a notice (none), or "" (one).

        JupyterHub starts the server at once when the form is "" and shows
        the spawn page (with a Start button) otherwise.
        """
        choices = self.choices(spawner)
        if not choices:
            return render_no_course_form(self.default_profile, self.no_course)
        return render_options_form(choices)

    @staticmethod
    def options_from_form(formdata: Mapping[str, Sequence[str]]) -> dict[str, str]:
        """``Spawner.options_from_form``: ``{"course": course_id}`` or ``{}``."""
        return parse_options_form(formdata)

    def choose(self, spawner: Any, user_options: Mapping[str, Any]) -> CourseProfile:
        """Return the profile for this start; a course not the user's falls back to the default.

        Raises
        ------
        tornado.web.HTTPError
            403 for a user in no course when ``no_course`` is ``"refuse"``.
        """
        choices = self.choices(spawner)
        if not choices and self.no_course == "refuse":
            spawner.log.info("coursehub: %s is in no course: not started", spawner._log_name)
            raise web.HTTPError(403, NO_COURSE_REFUSED)
        requested = user_options.get("course") if isinstance(user_options, Mapping) else None
        try:
            return choose_profile(choices, str(requested or ""), self.default_profile)
        except UsageError as exc:
            spawner.log.warning("coursehub: %s: %s; using the default", spawner._log_name, exc)
            return choose_profile(choices, None, self.default_profile)

    def apply(self, spawner: Any, user_options: Mapping[str, Any]) -> Awaitable[None] | None:
        """``Spawner.apply_user_options``: apply the chosen profile's traits to ``spawner``.

        With a budget check, return the coroutine that checks the user's week
        in the course first (JupyterHub awaits it, ``Spawner._run_apply_user_options``).

        Raises
        ------
        tornado.web.HTTPError
            503 when the profile needs GPUs and none has room; 500 when a
            course group holds a malformed profile; 403 for a user in no
            course when ``no_course`` is ``"refuse"``, or over the week's budget.
        """
        if self.budget is None and self.exams is None:
            self._apply(spawner, user_options)
            return None
        return self._apply_checked(spawner, user_options)

    async def _apply_checked(self, spawner: Any, user_options: Mapping[str, Any]) -> None:
        profile = self.choose(spawner, user_options or {})
        requested = (user_options or {}).get("course")
        choices = self.choices(spawner)
        course_id = course_of_start(choices, str(requested or ""))
        seat = None
        if self.exams is not None:  # the course started for first, then the user's others
            courses = [course_id, *(c.course_id for c in choices if c.course_id != course_id)]
            seat = await self.exams.seat(spawner, courses)
        if seat is not None:  # an exam runs under its own course's profile, budget or not
            user_options = {**(user_options or {}), "course": seat.course_id}
        elif self.budget is not None:
            await self.budget.check(spawner, course_id, profile.gpus)
        self._apply(spawner, user_options, seat)

    def _apply(self, spawner: Any, user_options: Mapping[str, Any], seat: Any = None) -> None:
        profile = self.choose(spawner, user_options or {})
        requested = str((user_options or {}).get("course") or "")
        course_id = course_of_start(self.choices(spawner), requested)
        gpu_ids = self._assign(spawner, profile)
        admin_env = admin_environment(spawner)
        override = spawner_override(profile, self.kind, gpu_ids, admin_env)
        tools = tools_of(spawner)
        override["environment"]["JUPYTER_CONFIG_PATH"] = plan_config_path(
            tools, _text_or_none(admin_env.get("JUPYTER_CONFIG_PATH"))
        )
        if profile.gpus and self.gpu_idle_s > 0:
            override["environment"][GPU_IDLE_VAR] = str(self.gpu_idle_s)
        if self.budget is not None:
            override["environment"][BUDGET_URL_VAR] = self.budget.base_url
        if course_id:
            override["environment"][COURSE_VAR] = course_id
        if self.exams is not None:
            override = self.exams.apply(spawner, override, self.kind, seat)
        apply_override(spawner, override)
        record_course(spawner, plan_user_options(user_options or {}, course_id))
        if seat is None:  # an exam home gets the exam's notebooks, not the course material
            apply_material(spawner, user_options)
        spawner.log.info(
            "coursehub: %s starts with profile %s (%s)%s, %s tools",
            spawner._log_name,
            profile.name,
            profile.describe(),
            f" on GPU {gpu_ids}" if gpu_ids else "",
            tools,
        )

    def _assign(self, spawner: Any, profile: CourseProfile) -> list[int]:
        key = server_key(spawner, self.hub_id)
        self.gpus.release(legacy_server_key(spawner))
        if self.kind not in ("local", "systemd") or profile.gpus == 0:
            self.gpus.release(key)
            return []
        try:
            return self.gpus.assign(key, self.gpu_ids(), profile.gpus, profile.jobs_per_gpu)
        except UsageError as exc:
            raise web.HTTPError(503, str(exc)) from exc

    def release(self, spawner: Any) -> None:
        """``Spawner.post_stop_hook``: free the GPUs of the stopped server."""
        self.gpus.release(server_key(spawner, self.hub_id))
        self.gpus.release(legacy_server_key(spawner))


def plan_user_options(user_options: Mapping[str, Any], course_id: str) -> dict[str, Any]:
    """Return ``user_options`` naming the course the server runs under (``"course"``).

    A student of one course starts without a spawn form (``{}``) and a course
    not the user's falls back to the default one (:func:`course_of_start`):
    either way ``"course"`` becomes ``course_id``, the course the profile is
    from; without a course (``""``) the key is left out.
    """
    options = {key: value for key, value in user_options.items() if key != "course"}
    return {**options, "course": course_id} if course_id else options


def record_course(spawner: Any, user_options: dict[str, Any]) -> None:
    """Give ``spawner`` the ``user_options`` of :func:`plan_user_options`, in the hub database too.

    The usage hook (:func:`coursehub.meter.hubhook.open_server_usage`) charges
    the server to that course, and the hub's REST API shows it
    (``user_options`` of a server model: the team's servers page, "Started
    for"); the database keeps it over a hub restart (JupyterHub loads a
    running server's ``user_options`` from ``orm_spawner``, committed after
    ``Spawner.start``).
    """
    spawner.user_options = user_options
    orm_spawner = getattr(spawner, "orm_spawner", None)
    if orm_spawner is not None:
        orm_spawner.user_options = dict(user_options)


def tools_of(spawner: Any) -> str:
    """Return the Jupyter tools of the spawner's user (see :mod:`coursehub.spawn.jupytertools`)."""
    groups = [group.name for group in spawner.user.groups]
    return plan_tools(groups, admin=bool(getattr(spawner.user, "admin", False)))


def _text_or_none(value: Any) -> str | None:
    # an admin's environment value may be a callable (JupyterHub calls it with the spawner)
    return value if isinstance(value, str) and value else None


def chain_hooks(*hooks: Callable[[Any], Any] | None) -> Callable[[Any], None]:
    """Return one spawner hook that calls each of ``hooks`` in order (None entries skipped)."""
    chosen = [hook for hook in hooks if hook is not None]

    def run(spawner: Any) -> None:
        for hook in chosen:
            hook(spawner)

    return run
