"""A jupyter_server extension: a kernel busy computing counts as activity for the idle culler.

jupyterhub-idle-culler stops servers whose ``last_activity`` on the hub is
older than its ``--timeout``. A single-user server reports
``ServerApp.web_app.last_activity()`` to the hub every
``hub_activity_interval`` seconds (``jupyterhub/singleuser/extension.py``,
``notify_activity``), the newest of: server start, API requests, kernel
messages (``MappingKernelManager.last_kernel_activity``) and the values of
``settings["last_activity_times"]`` (``jupyter_server/serverapp.py``,
``ServerWebApplication.last_activity``). A kernel that computes silently (a
grid search, a training loop without output) sends no message while busy,
so once the browser tab is closed the server looks idle and is culled with
its computation (jupyterhub/jupyterhub-idle-culler#10).

This extension looks at every kernel each ``interval_s`` seconds and, while
one is ``busy`` (its last ``status`` message, as recorded by jupyter_server's
``execution_state``), writes the current time to
``settings["last_activity_times"]["coursehub_busy_kernels"]``. A kernel busy
for longer than ``max_busy_s`` without a pause (a stuck loop) stops counting.

Enable it on the single-user servers (``coursehub hub config`` does)::

    c.Spawner.args = ["--ServerApp.jpserver_extensions=coursehub.spawn.busyactivity=True"]

A server where coursehub is not installed logs a warning and runs without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from tornado.ioloop import PeriodicCallback
from traitlets import Float
from traitlets.config import LoggingConfigurable

from coursehub.contract import BUSY_EXTENSION, MAX_BUSY_S, SERVER_ARG

__all__ = ["ACTIVITY_KEY", "MAX_BUSY_S", "SERVER_ARG", "BusyKernelActivity", "plan_busy_since"]

#: Key of ``settings["last_activity_times"]`` written by this extension.
ACTIVITY_KEY = "coursehub_busy_kernels"


def plan_busy_since(
    states: Mapping[str, str],
    busy_since: Mapping[str, datetime],
    now: datetime,
) -> dict[str, datetime]:
    """Return when each busy kernel became busy (as far as the polls saw).

    Parameters
    ----------
    states
        Kernel id -> ``execution_state`` now (``"busy"``, ``"idle"``, ``"starting"``...).
    busy_since
        The previous poll's answer.
    now
        This poll's time (UTC).

    Returns
    -------
    dict
        Kernel id -> first poll that saw it busy without an idle poll since;
        kernels not busy now are left out.
    """
    return {kid: busy_since.get(kid, now) for kid, state in states.items() if state == "busy"}


def busy_activity(busy_since: Mapping[str, datetime], now: datetime, max_busy_s: float) -> bool:
    """Return True if a kernel is busy and, with ``max_busy_s`` > 0, busy for at most that long."""
    limit = timedelta(seconds=max_busy_s)
    return any(max_busy_s <= 0 or now - since <= limit for since in busy_since.values())


class BusyKernelActivity(LoggingConfigurable):
    """Record activity while a kernel is busy (configure as ``c.BusyKernelActivity.*``)."""

    interval_s = Float(
        60.0, help="Seconds between two looks at the kernels (JupyterHub reports every 300 s)."
    ).tag(config=True)
    max_busy_s = Float(
        MAX_BUSY_S,
        help="A kernel busy longer than this without a pause no longer counts (0: no limit).",
    ).tag(config=True)

    def __init__(self, kernel_manager: Any, settings: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel_manager = kernel_manager
        self.settings = settings
        self.busy_since: dict[str, datetime] = {}
        self._callback: PeriodicCallback | None = None

    def kernel_states(self) -> dict[str, str]:
        """Return kernel id -> ``execution_state`` of the running kernels."""
        states = {}
        for kernel_id in list(self.kernel_manager.list_kernel_ids()):
            try:
                kernel = self.kernel_manager.get_kernel(kernel_id)
            except KeyError:  # shut down meanwhile
                continue
            states[kernel_id] = str(getattr(kernel, "execution_state", ""))
        return states

    def check(self, now: datetime | None = None) -> bool:
        """Look at the kernels once; record activity and return True if one counts as busy."""
        now = now or datetime.now(UTC)
        self.busy_since = plan_busy_since(self.kernel_states(), self.busy_since, now)
        if not busy_activity(self.busy_since, now, self.max_busy_s):
            return False
        self.settings.setdefault("last_activity_times", {})[ACTIVITY_KEY] = now
        return True

    def start(self) -> None:
        """Check every ``interval_s`` seconds on the server's event loop."""
        self._callback = PeriodicCallback(self._tick, self.interval_s * 1000)
        self._callback.start()

    def _tick(self) -> None:
        self.check()

    def stop(self) -> None:
        """Stop checking."""
        if self._callback is not None:
            self._callback.stop()


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Declare this module as a jupyter_server extension."""
    return [{"module": BUSY_EXTENSION}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Start watching the kernels of ``serverapp`` (called by jupyter_server)."""
    watcher = BusyKernelActivity(
        serverapp.kernel_manager, serverapp.web_app.settings, parent=serverapp
    )
    watcher.start()
    serverapp.web_app.settings["coursehub_busy_watcher"] = watcher
    serverapp.log.info(
        "coursehub: busy kernels count as activity (every %g s, up to %g s busy)",
        watcher.interval_s,
        watcher.max_busy_s,
    )
