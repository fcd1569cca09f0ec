"""A jupyter_server extension: a kernel stopped for memory says so in the cell that was running.

A server started under a course profile runs in a memory cgroup with the
course's limit (:mod:`coursehub.spawn.cgroupspawner`). A cell that goes past
it makes the kernel's OOM killer stop a process of the cgroup with SIGKILL.
Jupyter Server's restarter (``jupyter_client/restarter.py``) then sees the
kernel dead, fires its ``restart`` callbacks and starts it again; the one the
kernel's websocket connection registered sends the status ``restarting``
(``jupyter_server/services/kernels/connection/channels.py``,
``on_kernel_restarted``), which JupyterLab shows as "The kernel appears to
have died. It will restart automatically." and nothing else
(2i2c-org/infrastructure#3427).

This extension does two things:

- **the message** (:class:`OomNoticeConnection`, the server's
  ``kernel_websocket_connection_class``): each connection follows which
  ``execute_request`` the kernel is running (the oldest one not answered).
  When the kernel died of SIGKILL and the server cgroup's ``oom_kill`` counter
  went up (:class:`OomWatch`), the connection sends an iopub ``error`` message
  whose parent is that request *before* ``restarting``: JupyterLab routes it to
  the cell that was running and shows it like a traceback (it drops a cell's
  pending messages once ``restarting`` arrives, ``@jupyterlab/services``
  ``KernelConnection._handleRestart``). The error names the limit, the peak
  reached and what to do (:func:`oom_error_content`).
- **the victim** (:meth:`OomWatch.raise_kernel_scores`): every kernel process
  gets ``oom_score_adj`` :data:`KERNEL_OOM_SCORE_ADJ`, so the OOM killer,
  which stops the process with the highest ``rss + oom_score_adj * limit /
  1000`` (``mm/oom_kill.c``, ``oom_badness``), picks a kernel before the
  server (which keeps the 0 it was started with) and, among kernels, the one
  using the most memory. An unprivileged process may raise its children's
  value, never lower it (``man 5 proc``, ``/proc/pid/oom_score_adj``).

Loaded with :mod:`coursehub.spawn.busyactivity`, which names this module as
its second extension point, so ``--ServerApp.jpserver_extensions=
coursehub.spawn.busyactivity=True`` (``coursehub hub config``) enables both.
Without a readable memory cgroup the kernels are still raised and no message
is sent (the restart is as before).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

from jupyter_server.services.kernels.connection.base import (
    deserialize_msg_from_ws_v1,
    serialize_msg_to_ws_v1,
)
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from tornado.ioloop import PeriodicCallback
from traitlets import List

from coursehub.resources.cgroupfs import MemoryState, locate_controller, read_memory_state
from coursehub.spawn.oomreason import killed_by_oom, oom_error_content

__all__ = ["KERNEL_OOM_SCORE_ADJ", "OomNoticeConnection", "OomWatch"]

#: ``oom_score_adj`` of kernel processes (-1000..1000; 0 is the default of every process).
KERNEL_OOM_SCORE_ADJ = 300
#: Key of ``web_app.settings`` holding this server's :class:`OomWatch`.
SETTINGS_KEY = "coursehub_oom_watch"
#: WebSocket subprotocol of JupyterLab 4 (binary frames, ``serialize_msg_to_ws_v1``).
WS_V1 = "v1.kernel.websocket.jupyter.org"


class OomWatch:
    """The server's memory cgroup: which kernel deaths were OOM kills; kernels' OOM scores.

    Parameters
    ----------
    read_state
        Returns the server cgroup's :class:`MemoryState` (None: no memory cgroup).
    """

    def __init__(self, read_state: Callable[[], MemoryState | None]) -> None:
        self.read_state = read_state
        first = read_state()
        self.seen = _count(first)
        self.verdicts: dict[int, MemoryState | None] = {}
        self.raised: set[int] = set()

    def verdict(self, pid: int, returncode: int | None) -> MemoryState | None:
        """Return the cgroup's state if kernel ``pid`` was OOM-killed, else None (once per pid).

        Every connection of a kernel asks; the first answer is kept, so the
        counter's increase is counted for one death only.
        """
        if pid not in self.verdicts:
            state = self.read_state()
            oom = state is not None and killed_by_oom(returncode, self.seen, state)
            self.seen = max(self.seen, _count(state))
            self.verdicts[pid] = state if oom else None
        return self.verdicts[pid]

    def raise_kernel_scores(self, kernel_pids: set[int]) -> None:
        """Write :data:`KERNEL_OOM_SCORE_ADJ` to each new kernel's ``/proc/PID/oom_score_adj``."""
        self.raised &= kernel_pids
        for pid in kernel_pids - self.raised:
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/oom_score_adj", "w") as handle:
                    handle.write(str(KERNEL_OOM_SCORE_ADJ))
                self.raised.add(pid)


def _count(state: MemoryState | None) -> int:
    if state is None:
        return 0
    count = state.oom_kills if state.oom_kills is not None else state.limit_hits
    return count or 0


def kernel_process(kernel_manager: Any) -> Any:
    """Return the ``Popen`` of a local kernel (jupyter_client's ``LocalProvisioner``), or None."""
    return getattr(getattr(kernel_manager, "provisioner", None), "process", None)


def kernel_pids(multi_kernel_manager: Any) -> set[int]:
    """Return the pids of the server's running local kernels."""
    pids = set()
    for kernel_id in list(multi_kernel_manager.list_kernel_ids()):
        with contextlib.suppress(KeyError):
            process = kernel_process(multi_kernel_manager.get_kernel(kernel_id))
            if process is not None and process.poll() is None:
                pids.add(process.pid)
    return pids


class OomNoticeConnection(ZMQChannelsWebsocketConnection):
    """A kernel websocket that tells the running cell when the kernel was OOM-killed.

    The running cell is the oldest ``execute_request`` this connection sent
    whose ``execute_reply`` has not come back: a kernel runs its shell
    requests in order. Its iopub ``busy`` status cannot tell, since a kernel
    killed early in a cell may never have sent it (ipykernel sends iopub from
    a thread).
    """

    def handle_incoming_message(self, incoming_msg: Any) -> None:
        """Note an ``execute_request`` from the browser, then forward it as Jupyter Server does."""
        with contextlib.suppress(Exception):  # never stop a message for this
            self._follow_request(incoming_msg)
        super().handle_incoming_message(incoming_msg)

    def handle_outgoing_message(self, stream: Any, outgoing_msg: list[Any]) -> None:
        """Note an ``execute_reply`` from the kernel, then forward it as Jupyter Server does."""
        channel = stream if isinstance(stream, str) else getattr(stream, "channel", None)
        if channel == "shell":
            with contextlib.suppress(Exception):
                self._follow_reply(outgoing_msg)
        super().handle_outgoing_message(stream, outgoing_msg)

    #: Headers of the execute requests sent and not answered, oldest first.
    pending: List[dict[str, Any]] = List()

    def _follow_request(self, incoming_msg: Any) -> None:
        if self.subprotocol == WS_V1:
            channel, parts = deserialize_msg_from_ws_v1(incoming_msg)
            header = self.session.unpack(parts[0])
        else:
            msg = json.loads(incoming_msg)
            channel, header = msg.get("channel"), msg.get("header", {})
        if channel == "shell" and header.get("msg_type") == "execute_request":
            self.pending = [*self.pending, header]

    def _follow_reply(self, outgoing_msg: list[Any]) -> None:
        _, fed = self.session.feed_identities(outgoing_msg)
        if self.session.unpack(fed[1]).get("msg_type") != "execute_reply":
            return
        answered = self.session.unpack(fed[2]).get("msg_id")
        self.pending = [h for h in self.pending if h.get("msg_id") != answered]

    def on_kernel_restarted(self) -> None:
        """Send the out-of-memory error to the running cell, then ``restarting``."""
        with contextlib.suppress(Exception):  # the restart goes on whatever happens here
            self._notify_oom()
        super().on_kernel_restarted()

    def _notify_oom(self) -> None:
        watch = self.websocket_handler.settings.get(SETTINGS_KEY)
        process = kernel_process(self.kernel_manager)
        if watch is None or process is None:
            return
        state = watch.verdict(process.pid, process.poll())
        if state is None:
            return
        self.log.warning(
            "coursehub: kernel %s was stopped by the OOM killer (limit %s, peak %s)",
            self.kernel_id,
            state.limit_bytes,
            state.peak_bytes,
        )
        pending = self.pending
        self.pending = []  # the restarted kernel answers none of them
        if pending:
            self._send_iopub("error", oom_error_content(state), pending[0])

    def _send_iopub(self, msg_type: str, content: dict[str, Any], parent: dict[str, Any]) -> None:
        msg = self.session.msg(msg_type, content, parent=parent)
        if self.subprotocol == WS_V1:
            self.write_message(serialize_msg_to_ws_v1(msg, "iopub", self.session.pack), binary=True)
        else:
            msg["channel"] = "iopub"
            self.write_message(json.dumps(msg, default=str))


def server_memory_state() -> MemoryState | None:
    """Return the :class:`MemoryState` of this process's memory cgroup, or None without one."""
    mount = locate_controller("memory")
    return read_memory_state(mount) if mount is not None else None


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Install the connection class and the kernels' OOM scores (called by jupyter_server)."""
    watch = OomWatch(server_memory_state)
    settings = serverapp.web_app.settings
    settings[SETTINGS_KEY] = watch
    settings["kernel_websocket_connection_class"] = OomNoticeConnection
    km = serverapp.kernel_manager
    callback = PeriodicCallback(lambda: watch.raise_kernel_scores(kernel_pids(km)), 1000)
    callback.start()
    settings["coursehub_oom_scores"] = callback
    state = watch.read_state()
    serverapp.log.info(
        "coursehub: kernels get oom_score_adj %d; out-of-memory kills are told (limit %s, pid %d)",
        KERNEL_OOM_SCORE_ADJ,
        state.limit_bytes if state else "no memory cgroup",
        os.getpid(),
    )
