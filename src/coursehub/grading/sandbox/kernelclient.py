"""The client of a sandboxed kernel: ready once its ``kernel_info`` request has gone full circle.

jupyter_client's ``KernelClient.wait_for_ready`` (8.x, ``client.py``
``_async_wait_for_ready``) sends ``kernel_info_request`` until a reply
comes on the shell channel followed by any message on IOPub within 0.2 s,
then empties IOPub until no message has come for 0.2 s. That last wait
always runs to its end: every kernel's start costs 0.2 s of silence
(measured on a forked kernel: the first request's reply 0.12-0.18 s after
it was sent, its ``status: idle`` 0.3 ms later, then 0.2 s of nothing).

:class:`SandboxKernelClient` waits for what the messaging protocol
promises instead (jupyter_client ``docs/messaging.rst``, "Kernel status"):
for every request the kernel publishes ``status: busy``, handles it, and
publishes ``status: idle`` once it "has finished publishing associated
IOPub messages". The ``idle`` whose parent is the client's own
``kernel_info_request`` therefore proves both that IOPub is subscribed
(a subscriber connected late misses what was published before: the
ZeroMQ guide, chapter 1, "Getting the Message Out", on the slow joiner)
and that every message the kernel sent before it has been read; what
the socket already holds is then read without waiting. If that ``idle``
does not come within :data:`IOPUB_S`, the request is sent again, as
jupyter_client does.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.utils import ensure_async

#: Seconds to wait for the reply on the shell channel before asking again (jupyter_client's).
REPLY_S = 1.0
#: Seconds to wait, after the reply, for the request's ``status: idle`` on IOPub (jupyter_client's).
IOPUB_S = 0.2


class SandboxKernelClient(AsyncKernelClient):
    """An ``AsyncKernelClient`` whose :meth:`wait_for_ready` waits for no fixed time."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """Return once the kernel has answered one ``kernel_info_request`` on shell and IOPub.

        ``timeout`` in seconds (None: no limit), as jupyter_client's.

        Raises
        ------
        RuntimeError
            If the kernel died, or did not answer within ``timeout`` (jupyter_client's
            errors, which nbclient reports).
        """
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            msg_id = self.kernel_info()
            reply = await self._reply_to(msg_id, REPLY_S)
            if reply is not None and await self._idle_after(msg_id, IOPUB_S):
                self._handle_kernel_info_reply(reply)
                await self._read_ready_iopub()
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")

    async def _reply_to(self, msg_id: str, timeout_s: float) -> dict[str, Any] | None:
        """Return the shell reply to ``msg_id``, None if none came within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg: dict[str, Any] = await ensure_async(self.shell_channel.get_msg(timeout=left))
            except Empty:
                return None
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg
        return None

    async def _idle_after(self, msg_id: str, timeout_s: float) -> bool:
        """Whether IOPub brought the ``status: idle`` of ``msg_id`` within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await ensure_async(self.iopub_channel.get_msg(timeout=left))
            except Empty:
                return False
            if (
                msg["msg_type"] == "status"
                and msg["content"].get("execution_state") == "idle"
                and msg["parent_header"].get("msg_id") == msg_id
            ):
                return True
        return False

    async def _read_ready_iopub(self) -> None:
        """Read and drop what IOPub holds already (what ``wait_for_ready`` leaves unread)."""
        while True:
            try:
                await ensure_async(self.iopub_channel.get_msg(timeout=0))
            except Empty:
                return
