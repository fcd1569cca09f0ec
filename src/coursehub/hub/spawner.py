"""Course profiles at spawn time: hooks that work with any JupyterHub spawner class.

:class:`CourseProfiles` plugs into the base ``Spawner`` configuration, so the
same four lines serve SystemdSpawner, the local cgroup spawner of
:mod:`coursehub.hub.cgroupspawner`, batchspawner's SlurmSpawner and
KubeSpawner (JupyterHub >= 5.3 for ``apply_user_options``)::

    from coursehub.hub.spawner import CourseProfiles
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
with two choices or more), the most generous being the default; a user in
none gets ``default_profile``. A stored or API-given ``course`` that is not
one of the user's courses is ignored (logged), never honoured.

GPU assignment (``local`` and ``systemd`` only; Slurm and Kubernetes assign
their own): each server gets the least-loaded GPUs that still have room
(``jobs_per_gpu``). Assignments live in a small JSON file (``state_path``,
next to the hub's database) updated under an exclusive ``flock`` and replaced
atomically, so they survive a hub restart; ``release`` (the
``post_stop_hook``) frees them when the server stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tornado import web

from coursehub.errors import UsageError
from coursehub.hub.profiles import (
    DEFAULT_PROFILE,
    SPAWNER_KINDS,
    CourseChoice,
    CourseProfile,
    choose_profile,
    parse_options_form,
    plan_choices,
    plan_gpu_assignment,
    render_options_form,
    spawner_override,
)

#: Default GPU state file, relative to the hub's working directory (where jupyterhub.sqlite is).
DEFAULT_STATE_PATH = "coursehub-gpus.json"

# Admin-configured values of dict traits, captured before the first override,
# so that a second spawn starts again from the admin's values.
_BASELINES: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()


class GpuAssignments:
    """GPU assignments of running servers, kept in a JSON file: ``{server_key: [gpu, ...]}``.

    Parameters
    ----------
    path
        The JSON file; its directory must exist. A ``.lock`` file next to it
        serialises updates across processes (``fcntl.flock``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, list[int]]]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self.read()
                before = dict(state)
                yield state
                if state != before:
                    self._write(state)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def read(self) -> dict[str, list[int]]:
        """Return the assignments (empty when the file does not exist yet)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise UsageError(f"GPU state file {self.path} is unreadable: {exc}") from exc
        return {str(k): [int(i) for i in v] for k, v in data.get("assignments", {}).items()}

    def _write(self, state: Mapping[str, list[int]]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".")
        with os.fdopen(fd, "w") as handle:
            json.dump({"assignments": dict(sorted(state.items()))}, handle, indent=1)
        os.replace(tmp, self.path)

    def loads(self) -> dict[int, int]:
        """Return GPU index -> number of servers assigned to it."""
        counts: dict[int, int] = {}
        for ids in self.read().values():
            for index in ids:
                counts[index] = counts.get(index, 0) + 1
        return counts

    def assign(self, key: str, gpu_ids: Sequence[int], n_gpus: int, jobs_per_gpu: int) -> list[int]:
        """Return the GPUs of server ``key``: its current ones if still valid, else new ones.

        Raises
        ------
        UsageError
            If not enough GPUs have room (see :func:`plan_gpu_assignment`).
        """
        with self._locked() as state:
            current = state.pop(key, [])
            if len(current) == n_gpus and set(current) <= set(gpu_ids):
                state[key] = current
                return current
            loads: dict[int, int] = {}
            for ids in state.values():
                for index in ids:
                    loads[index] = loads.get(index, 0) + 1
            chosen = plan_gpu_assignment(loads, gpu_ids, n_gpus, jobs_per_gpu)
            if chosen:
                state[key] = chosen
            return chosen

    def release(self, key: str) -> None:
        """Forget the GPUs of server ``key`` (nothing happens if it had none)."""
        if not self.path.exists():
            return
        with self._locked() as state:
            state.pop(key, None)


def server_key(spawner: Any) -> str:
    """Return ``"user/server"`` (``"user/"`` for the default server)."""
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
        Spawner kind (:data:`coursehub.hub.profiles.SPAWNER_KINDS`).
    default_profile
        Profile of a user in no course with a profile.
    gpu_ids
        GPU indices of this machine; None: ask NVML at the first GPU request
        (:func:`coursehub.resources.gpu_inventory`). Used by ``local`` and
        ``systemd`` only.
    state_path
        JSON file of the GPU assignments (see :class:`GpuAssignments`).

    Raises
    ------
    UsageError
        If ``kind`` is unknown.
    """

    def __init__(
        self,
        kind: str,
        default_profile: CourseProfile = DEFAULT_PROFILE,
        gpu_ids: Sequence[int] | None = None,
        state_path: str | os.PathLike[str] = DEFAULT_STATE_PATH,
    ) -> None:
        if kind not in SPAWNER_KINDS:
            raise UsageError(f"unknown spawner kind {kind!r}: choose one of {SPAWNER_KINDS}")
        self.kind = kind
        self.default_profile = default_profile
        self._gpu_ids = None if gpu_ids is None else list(gpu_ids)
        self.gpus = GpuAssignments(state_path)

    def gpu_ids(self) -> list[int]:
        """Return this machine's GPU indices (NVML, asked once, when none were given)."""
        if self._gpu_ids is None:
            from coursehub.resources import gpu_inventory

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
        """``Spawner.options_form``: a course picker, or "" (no form) for fewer than 2 courses."""
        return render_options_form(self.choices(spawner))

    @staticmethod
    def options_from_form(formdata: Mapping[str, Sequence[str]]) -> dict[str, str]:
        """``Spawner.options_from_form``: ``{"course": course_id}`` or ``{}``."""
        return parse_options_form(formdata)

    def choose(self, spawner: Any, user_options: Mapping[str, Any]) -> CourseProfile:
        """Return the profile for this start; a course not the user's falls back to the default."""
        choices = self.choices(spawner)
        requested = user_options.get("course") if isinstance(user_options, Mapping) else None
        try:
            return choose_profile(choices, str(requested or ""), self.default_profile)
        except UsageError as exc:
            spawner.log.warning("coursehub: %s: %s; using the default", spawner._log_name, exc)
            return choose_profile(choices, None, self.default_profile)

    def apply(self, spawner: Any, user_options: Mapping[str, Any]) -> None:
        """``Spawner.apply_user_options``: apply the chosen profile's traits to ``spawner``.

        Raises
        ------
        tornado.web.HTTPError
            503 when the profile needs GPUs and none has room; 500 when a
            course group holds a malformed profile.
        """
        profile = self.choose(spawner, user_options or {})
        gpu_ids = self._assign(spawner, profile)
        override = spawner_override(profile, self.kind, gpu_ids, admin_environment(spawner))
        apply_override(spawner, override)
        spawner.log.info(
            "coursehub: %s starts with profile %s (%s)%s",
            spawner._log_name,
            profile.name,
            profile.describe(),
            f" on GPU {gpu_ids}" if gpu_ids else "",
        )

    def _assign(self, spawner: Any, profile: CourseProfile) -> list[int]:
        if self.kind not in ("local", "systemd") or profile.gpus == 0:
            self.gpus.release(server_key(spawner))
            return []
        try:
            return self.gpus.assign(
                server_key(spawner), self.gpu_ids(), profile.gpus, profile.jobs_per_gpu
            )
        except UsageError as exc:
            raise web.HTTPError(503, str(exc)) from exc

    def release(self, spawner: Any) -> None:
        """``Spawner.post_stop_hook``: free the GPUs of the stopped server."""
        self.gpus.release(server_key(spawner))


def chain_hooks(*hooks: Callable[[Any], Any] | None) -> Callable[[Any], None]:
    """Return one spawner hook that calls each of ``hooks`` in order (None entries skipped)."""
    chosen = [hook for hook in hooks if hook is not None]

    def run(spawner: Any) -> None:
        for hook in chosen:
            hook(spawner)

    return run
