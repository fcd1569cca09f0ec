"""The student's home quota at each start: set on the home, and told to the server.

``coursehub hub sync`` writes each course's home quota into its groups'
properties (``home_quota``, bytes: the course's, else its portal's,
:func:`coursehub.hub.sync.course_properties`; absent: neither has one, the
department's default applies). :class:`HomeLimit`, a ``Spawner.pre_spawn_hook``
(run after ``apply_user_options``, jupyterhub ``user.py`` ``User.spawn``):

* picks the student's quota as ``coursehub home plan`` does
  (:func:`plan_home_quota`: the most generous of their student groups; teams
  are not limited);
* sets it on a ``local`` or ``systemd`` home the hub can reach
  (:func:`coursehub.homequota.fs.apply_limit`), so that a home made after the
  last ``coursehub home apply`` has its limit from its first start. Best
  effort: a file system without quotas, a missing tool or a failing command
  is logged and the server starts anyway;
* passes it to the server as ``COURSEHUB_HOME_QUOTA_BYTES``, which the disk
  display (:mod:`coursehub.spawn.homedisk`) shows as the home's size.

A student without a quota gets neither: nothing is removed at spawn
(``coursehub home apply`` removes a limit taken away).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping
from typing import Any

from coursehub.contract import parse_course_group
from coursehub.errors import UsageError
from coursehub.resources.units import parse_mem

#: The server's environment variable carrying the home quota in bytes.
QUOTA_ENV = "COURSEHUB_HOME_QUOTA_BYTES"
#: The department's default quota (read where the hub runs).
DEFAULT_VAR = "COURSEHUB_HOME_QUOTA"
#: The group property holding a course's home quota in bytes.
QUOTA_PROPERTY = "home_quota"
#: Spawner kinds whose homes the hub sets a limit on (its own file systems).
LOCAL_KINDS = ("local", "systemd")


def department_default(environ: Mapping[str, str]) -> int | None:
    """Return ``COURSEHUB_HOME_QUOTA`` (a size such as ``2G``) in bytes; unset or ``none``: None.

    The hub's reading of the department default of
    :func:`coursehub.homequota.plan.department_default`, without the catalog.

    Raises
    ------
    UsageError
        For a size :func:`coursehub.resources.units.parse_mem` refuses.
    """
    text = environ.get(DEFAULT_VAR, "").strip()
    if text.lower() in ("", "none"):
        return None
    try:
        return parse_mem(text)
    except (UsageError, ValueError) as exc:
        raise UsageError(f"{DEFAULT_VAR}: {exc}") from None


def plan_home_quota(
    groups: Iterable[tuple[str, Mapping[str, Any]]], default: int | None
) -> int | None:
    """Return the home quota in bytes of a user in ``groups`` (``(name, properties)``), or None.

    Each student group counts with its ``home_quota`` property, else
    ``default``; the most generous wins and any course without a limit means
    none (as :func:`coursehub.homequota.plan.student_quotas`). None too for a
    user in no student group (pure).
    """
    quotas: list[int | None] = []
    for name, properties in groups:
        parsed = parse_course_group(name)
        if parsed is None or parsed[0] != "students":
            continue
        value = properties.get(QUOTA_PROPERTY)
        quotas.append(int(value) if isinstance(value, int) and value > 0 else default)
    if not quotas or any(q is None for q in quotas):
        return None
    return max(q for q in quotas if q is not None)


class HomeLimit:
    """``Spawner.pre_spawn_hook``: the student's home quota (see the module docstring).

    Parameters
    ----------
    kind
        The spawner kind (:data:`coursehub.contract.SPAWNER_KINDS`).
    default
        The department's default in bytes (``COURSEHUB_HOME_QUOTA`` where the
        hub runs), None for no limit.
    apply
        Sets a limit: ``apply(home, user, bytes)``; default
        :func:`coursehub.homequota.fs.apply_limit`.
    """

    def __init__(self, kind: str, default: int | None = None, apply: Any = None) -> None:
        self.kind = kind
        self.default = default
        self._apply = apply

    def __call__(self, spawner: Any) -> None:
        """Tell the server its quota and set it on the home; never raises."""
        groups = [(g.name, g.properties or {}) for g in spawner.user.groups]
        quota = plan_home_quota(groups, self.default)
        if quota is None:
            return
        spawner.environment = {**spawner.environment, QUOTA_ENV: str(quota)}
        if self.kind in LOCAL_KINDS:
            self._set_limit(spawner, quota)

    def _set_limit(self, spawner: Any, quota: int) -> None:
        from coursehub.homequota.fs import apply_limit

        user = spawner.user.name
        try:
            home = _home_of(spawner)
            if home is None:
                spawner.log.info("coursehub: %s has no home yet: no quota set", user)
                return
            backend = (self._apply or apply_limit)(home, user, quota)
        except Exception as exc:  # best effort: the server starts anyway
            spawner.log.warning("coursehub: %s: home quota not set: %s", user, exc)
            return
        kind = getattr(backend, "kind", backend)
        spawner.log.info("coursehub: %s: home quota %d bytes (%s)", user, quota, kind)


def _home_of(spawner: Any) -> str | None:
    """The server's home: the simple spawner's ``home_dir``, else the account's; None if missing."""
    home = getattr(spawner, "home_dir", None)
    if not (isinstance(home, str) and home):
        try:
            home = pwd.getpwnam(spawner.user.name).pw_dir
        except KeyError:
            return None
    return home if os.path.isdir(home) else None
