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

A running runner job of the server's user counts the same way (a kernel
running ``%coursehub_run`` is busy anyway): a ``coursehub run`` started from a
terminal (a process ``python -m coursehub.runner.bootstrap`` below this
server) or with ``--no-wait`` (its runner's ``<job id>.pid`` in the runs
directory, :func:`coursehub.settings.runs_dir`, as
:mod:`coursehub.runner.control` reads it).

A server holding a GPU is stopped sooner: where the hub set
``COURSEHUB_GPU_IDLE_S`` (:class:`coursehub.spawn.spawner.CourseProfiles`
does for a profile with GPUs), this extension sets Jupyter Server's own
settings (:func:`plan_gpu_culling`): ``MappingKernelManager.cull_idle_timeout``
(a kernel idle that long is shut down, even with a tab open:
``cull_connected``; never a busy one: ``cull_busy`` stays False) and
``ServerApp.shutdown_no_activity_timeout`` (with no kernel left and no
activity for that long the server stops itself; the hub sees it stopped
and frees its GPU). A busy kernel or a running job keeps it, as above.

Enable it on the single-user servers (``coursehub hub config`` does)::

    c.Spawner.args = ["--ServerApp.jpserver_extensions=coursehub.spawn.busyactivity=True"]

It also loads :mod:`coursehub.spawn.oomnotice` (a second extension point): a
kernel stopped by the out-of-memory killer says so in the running cell; and
:mod:`coursehub.spawn.homedisk` (a third): the disk display shows the home quota.

A server where coursehub is not installed logs a warning and runs without it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
from tornado.ioloop import PeriodicCallback
from traitlets import Bool, Float
from traitlets.config import LoggingConfigurable

from coursehub.contract import (
    BUSY_EXTENSION,
    HOMEDISK_EXTENSION,
    MAX_BUSY_S,
    OOM_EXTENSION,
)
from coursehub.settings import runs_dir

__all__ = [
    "ACTIVITY_KEY",
    "GPU_IDLE_VAR",
    "BusyKernelActivity",
    "plan_busy_since",
    "plan_gpu_culling",
    "running_job_pids",
]

#: Key of ``settings["last_activity_times"]`` written by this extension.
ACTIVITY_KEY = "coursehub_busy_kernels"
#: Environment variable: seconds of inactivity after which a server holding a GPU stops.
GPU_IDLE_VAR = "COURSEHUB_GPU_IDLE_S"
#: Module every runner job's first process runs (``coursehub.runner.jobenv.BOOTSTRAP_MODULE``).
RUNNER_BOOTSTRAP = "coursehub.runner.bootstrap"
#: Prefix of the pseudo kernel ids given to running jobs in :func:`plan_busy_since`.
JOB_PREFIX = "job:"


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


def parse_gpu_idle_s(text: str | None) -> int | None:
    """Return the seconds of ``$COURSEHUB_GPU_IDLE_S``, or None when unset, 0 or not a number."""
    try:
        value = int(float((text or "").strip()))
    except ValueError:
        return None
    return value if value > 0 else None


def plan_gpu_culling(
    gpu_idle_s: int, cull_idle_timeout: int, cull_interval: int
) -> dict[str, dict[str, Any]]:
    """Return the Jupyter Server settings that stop an idle server holding a GPU (pure).

    Parameters
    ----------
    gpu_idle_s
        Seconds of inactivity allowed to a server holding a GPU (> 0).
    cull_idle_timeout, cull_interval
        ``MappingKernelManager``'s values now (0: kernel culling off).

    Returns
    -------
    dict
        ``{"ServerApp": {...}, "MappingKernelManager": {...}}``: trait -> value.
        Kernels idle for ``gpu_idle_s`` (or the shorter configured timeout)
        are shut down even with a browser tab connected, never while busy;
        the culler looks at least every ``gpu_idle_s / 2`` s; the server stops
        once no kernel is left and nothing was active for ``gpu_idle_s``
        (Jupyter Server checks that every 60 s: ``ServerApp.shutdown_no_activity``).
    """
    timeout = gpu_idle_s if cull_idle_timeout <= 0 else min(cull_idle_timeout, gpu_idle_s)
    interval = max(1, min(cull_interval, gpu_idle_s // 2)) if cull_interval > 0 else gpu_idle_s
    return {
        "ServerApp": {"shutdown_no_activity_timeout": gpu_idle_s},
        "MappingKernelManager": {
            "cull_idle_timeout": timeout,
            "cull_interval": max(1, interval),
            "cull_busy": False,
            "cull_connected": True,
        },
    }


def plan_pid_file_pids(texts: Iterable[str]) -> set[int]:
    """Return the pids written in ``<job id>.pid`` files (one number each; others ignored)."""
    pids = set()
    for text in texts:
        word = text.strip()
        if word.isdigit() and int(word) > 0:
            pids.add(int(word))
    return pids


def running_job_pids(server_pid: int, runs_dir: Path) -> set[int]:
    """Return the pids of this user's runner jobs running now (an edge: psutil, the runs dir).

    A job below the server (its bootstrap process, started from a terminal
    or a kernel) or a ``--no-wait`` runner named in a ``*.pid`` file of
    ``runs_dir`` whose process is alive and runs coursehub. Processes that
    vanish or cannot be read are skipped.
    """
    found: set[int] = set()
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(server_pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if RUNNER_BOOTSTRAP in child.cmdline():
                    found.add(child.pid)
    texts = []
    with contextlib.suppress(OSError):
        for path in Path(runs_dir).glob("*.pid"):
            with contextlib.suppress(OSError):
                texts.append(path.read_text()[:32])
    for pid in plan_pid_file_pids(texts):
        with contextlib.suppress(psutil.Error):
            if any("coursehub" in part for part in psutil.Process(pid).cmdline()):
                found.add(pid)
    return found


class BusyKernelActivity(LoggingConfigurable):
    """Record activity while a kernel is busy (configure as ``c.BusyKernelActivity.*``)."""

    interval_s = Float(
        60.0, help="Seconds between two looks at the kernels (JupyterHub reports every 300 s)."
    ).tag(config=True)
    max_busy_s = Float(
        MAX_BUSY_S,
        help="A kernel busy longer than this without a pause no longer counts (0: no limit).",
    ).tag(config=True)

    count_jobs = Bool(
        True, help="A running runner job of this user counts as activity, like a busy kernel."
    ).tag(config=True)

    def __init__(self, kernel_manager: Any, settings: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel_manager = kernel_manager
        self.settings = settings
        self.server_pid = os.getpid()
        self.runs_dir = runs_dir()
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
        states = self.kernel_states()
        if self.count_jobs:
            jobs = running_job_pids(self.server_pid, self.runs_dir)
            states.update({f"{JOB_PREFIX}{pid}": "busy" for pid in jobs})
        self.busy_since = plan_busy_since(states, self.busy_since, now)
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
    """Declare this module and the out-of-memory notice as jupyter_server extensions.

    A package may list several extension points, each a module with its own
    ``_load_jupyter_server_extension`` (jupyter_server ``extension/manager.py``,
    ``ExtensionPackage``): enabling this one enables :mod:`coursehub.spawn.oomnotice`
    and :mod:`coursehub.spawn.homedisk`.
    """
    return [{"module": BUSY_EXTENSION}, {"module": OOM_EXTENSION}, {"module": HOMEDISK_EXTENSION}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Start watching the kernels of ``serverapp`` (called by jupyter_server)."""
    watcher = BusyKernelActivity(
        serverapp.kernel_manager, serverapp.web_app.settings, parent=serverapp
    )
    watcher.start()
    serverapp.web_app.settings["coursehub_busy_watcher"] = watcher
    gpu_idle_s = parse_gpu_idle_s(os.environ.get(GPU_IDLE_VAR))
    if gpu_idle_s is not None:
        apply_gpu_culling(serverapp, gpu_idle_s)
    serverapp.log.info(
        "coursehub: busy kernels count as activity (every %g s, up to %g s busy)",
        watcher.interval_s,
        watcher.max_busy_s,
    )


def apply_gpu_culling(serverapp: Any, gpu_idle_s: int) -> None:
    """Set :func:`plan_gpu_culling`'s values on ``serverapp`` and its kernel manager.

    Called while the server initialises (before ``init_shutdown_no_activity``
    and before the first kernel starts the kernel culler), so both take them.
    """
    km = serverapp.kernel_manager
    plan = plan_gpu_culling(gpu_idle_s, int(km.cull_idle_timeout), int(km.cull_interval))
    for name, value in plan["ServerApp"].items():
        setattr(serverapp, name, value)
    for name, value in plan["MappingKernelManager"].items():
        setattr(km, name, value)
    serverapp.log.info(
        "coursehub: this server holds a GPU: it stops after %d s without activity", gpu_idle_s
    )
