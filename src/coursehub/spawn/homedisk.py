"""A jupyter_server extension: the disk display shows the student's home quota, not the disk.

jupyter-resource-usage (``track_disk_usage``) reports ``disk_used`` and
``disk_total`` of ``/api/metrics/v1`` from ``psutil.disk_usage(disk_path)``
(jupyter_resource_usage ``api.py``, ``ApiHandler.get``): ``statvfs`` of the
home, the whole file system on a btrfs qgroup home or under ext4/XFS user
quotas. :class:`HomeQuotaApiHandler` subclasses that handler and rewrites its
disk figures (:func:`plan_disk_metrics`, pure): ``disk_total`` is the quota
(``COURSEHUB_HOME_QUOTA_BYTES``, set at spawn by
:class:`coursehub.spawn.homelimit.HomeLimit`, else the limit the file system
reports), ``disk_used`` the home's use as its quota counts it
(:func:`coursehub.homequota.reading.read_home_usage`), else the walk of
:func:`coursehub.homequota.usage.home_usage` (a student may not read their
btrfs qgroup), else the file system's ``used``; the warning
(``limits.disk.warn``) is recomputed with ``disk_warning_threshold``. The
reading is done off the event loop and kept :data:`READ_EVERY_S` seconds
(the display asks every few seconds). With no quota known the figures are
left as jupyter-resource-usage gives them.

The handler is registered on the same route before jupyter-resource-usage's
own: jupyter_server loads enabled extensions in the order of their names
(``ExtensionManager.sorted_extensions``, jupyter_server
``extension/manager.py``) and tornado answers with the first rule that
matches (``Application.add_handlers`` inserts before the catch-all, in
order). Loaded with :mod:`coursehub.spawn.busyactivity` (an extension point
of it).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, ClassVar

from coursehub.spawn.homelimit import QUOTA_ENV

#: Seconds a reading of the home is reused.
READ_EVERY_S = 30.0
#: jupyter-resource-usage's metrics route.
METRICS_ROUTE = "/api/metrics/v1"


def parse_quota_env(value: str | None) -> int | None:
    """Return ``COURSEHUB_HOME_QUOTA_BYTES`` as a positive int, else None (pure)."""
    try:
        quota = int(value or "")
    except ValueError:
        return None
    return quota if quota > 0 else None


def plan_disk_metrics(
    metrics: dict[str, Any], used: int, total: int, warn_fraction: float
) -> dict[str, Any]:
    """Return ``metrics`` with ``disk_used``, ``disk_total``, ``limits.disk`` of a quota (pure).

    ``warn`` is jupyter-resource-usage's test: less than ``warn_fraction`` of
    ``total`` left (no ``warn`` for a fraction of 0).
    """
    limits = dict(metrics.get("limits", {}))
    disk: dict[str, Any] = {"disk": total}
    if warn_fraction:
        disk["warn"] = (total - used) < total * warn_fraction
    limits["disk"] = disk
    return {**metrics, "disk_used": used, "disk_total": total, "limits": limits}


def read_home(home: str, quota: int | None) -> tuple[int, int] | None:
    """Return ``(bytes used, quota bytes)`` of ``home``, or None when no quota is known.

    The quota is ``quota`` (the catalog's, from the hub), else the one the file
    system enforces; the use is the quota's own reading, else the walk of the
    home, else the file system's ``used``.
    """
    from coursehub.homequota.fs import QuotaError, detect_backend
    from coursehub.homequota.reading import read_home_usage
    from coursehub.homequota.usage import home_usage

    used: int | None = None
    enforced: int | None = None
    try:
        backend = detect_backend(home)
        if backend.kind is not None:
            used, enforced = read_home_usage(backend, home)
    except (QuotaError, OSError):
        pass
    total = quota or enforced
    if total is None:
        return None
    if used is None:
        used = home_usage(home).used_bytes
    if used is None:
        import psutil

        used = psutil.disk_usage(home).used
    return used, total


def _make_handler(api_handler: type) -> type:
    """Return the subclass of jupyter-resource-usage's ``ApiHandler`` (imported when loaded)."""
    from tornado.concurrent import run_on_executor

    class HomeQuotaApiHandler(api_handler):
        """``/api/metrics/v1`` with the home's quota as its disk (module docstring)."""

        reading: ClassVar[dict[str, Any]] = {"at": None, "value": None}

        async def get(self) -> None:
            config = self.settings["jupyter_resource_usage_display_config"]
            if config.track_disk_usage:
                await self._refresh(str(config.disk_path))
            await super().get()

        @run_on_executor
        def _refresh(self, home: str) -> None:
            cache = HomeQuotaApiHandler.reading
            if cache["at"] is not None and time.monotonic() - cache["at"] < READ_EVERY_S:
                return
            quota = parse_quota_env(os.environ.get(QUOTA_ENV))
            cache["value"] = read_home(home, quota)
            cache["at"] = time.monotonic()

        def write(self, chunk: Any) -> None:
            value = HomeQuotaApiHandler.reading["value"]
            if isinstance(chunk, str) and value is not None and '"disk_total"' in chunk:
                config = self.settings["jupyter_resource_usage_display_config"]
                threshold = config.disk_warning_threshold
                used, total = value
                chunk = json.dumps(plan_disk_metrics(json.loads(chunk), used, total, threshold))
            super().write(chunk)

    return HomeQuotaApiHandler


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register :class:`HomeQuotaApiHandler` on the metrics route (called by jupyter_server)."""
    try:
        from jupyter_resource_usage.api import ApiHandler
    except ImportError:
        serverapp.log.info("coursehub: no jupyter-resource-usage: no home quota display")
        return
    from jupyter_server.utils import url_path_join

    web_app = serverapp.web_app
    route = url_path_join(web_app.settings["base_url"], METRICS_ROUTE)
    web_app.add_handlers(".*", [(route, _make_handler(ApiHandler))])
    quota = parse_quota_env(os.environ.get(QUOTA_ENV))
    serverapp.log.info("coursehub: the disk display shows the home quota (%s bytes)", quota)
