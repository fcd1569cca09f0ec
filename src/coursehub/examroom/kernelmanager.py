"""Exam kernels: no network at all, the exam's refusals loaded, ZMQ over Unix sockets.

The exam server (jupyter-server) stays in the host's network, where the
hub's proxy reaches it; each of its kernels starts in fresh user, network,
mount and PID namespaces (``unshare``, through
:func:`coursehub.sandbox.command.plan_sandbox_command`, as the grading
sandbox does), with every capability dropped before the kernel's code runs.
A new network namespace holds only a loopback interface, down
(network_namespaces(7)): ``socket.create_connection`` to any address, another
student's server on this host included, fails. The kernel still talks to its
server: the ZMQ channels use transport ``ipc`` (Unix sockets in the server's
runtime folder, jupyter_client's ``KernelManager.transport``), which a
network namespace does not cut.

The kernel (ipykernel's) also loads :mod:`coursehub.examroom.guard` (the
message layer: shell escapes and imports outside the exam's list refused with
one line). The exam server's configuration
(:func:`coursehub.examroom.server.plan_exam_args`) sets::

    --MultiKernelManager.kernel_manager_class=coursehub.examroom.kernelmanager.ExamKernelManager

Each kernel also gets its own empty ``/tmp``, ``/var/tmp`` and
``/dev/shm`` (:func:`coursehub.sandbox.plan.private_folders`, a folder of its
own removed with it), with its interpreter, its connection file's and
sockets' folders, its working folder and the exam home shown again where they
lie under them (:func:`coursehub.sandbox.folders.plan_private`): on a host
where every student's ``/tmp`` is the same, nothing one student's kernel
writes there reaches another's during the exam.

A host that allows no user namespaces cannot cut a kernel from the network:
the kernel is then refused (:class:`ExamKernelError`), never started with the
network.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jupyter_client.ioloop import AsyncIOLoopKernelManager
from traitlets import List, Unicode

from coursehub.errors import CoursehubError
from coursehub.examroom.guard import HOME_VAR, IMPORTS_VAR, parse_allowed_imports
from coursehub.sandbox.command import SandboxPlan, plan_sandbox_command, sandbox_mode

#: The IPython extension every exam kernel loads.
GUARD_EXTENSION = "coursehub.examroom.guard"
#: Longest ipc prefix: a Unix socket path holds 107 bytes (unix(7), ``sun_path``), and ZMQ
#: adds ``-<n>`` for each channel.
MAX_IPC_PREFIX = 100


def plan_ipc_prefix(connection_file: str) -> str | None:
    """Return the sockets' prefix beside ``connection_file`` (jupyter_client's own), or None
    when the socket paths would not fit in ``sun_path`` (pure)."""
    prefix = os.path.splitext(connection_file)[0] + "-ipc"
    return prefix if len(os.fsencode(prefix)) <= MAX_IPC_PREFIX else None


class ExamKernelError(CoursehubError):
    """An exam kernel that cannot be started without its network cut."""


def is_ipykernel(kernel_cmd: list[str]) -> bool:
    """Whether ``kernel_cmd`` starts ipykernel (``-m ipykernel_launcher`` or ``-m ipykernel``)."""
    return any(
        kernel_cmd[i] == "-m" and kernel_cmd[i + 1] in ("ipykernel_launcher", "ipykernel")
        for i in range(len(kernel_cmd) - 1)
    )


def plan_exam_kernel_command(
    kernel_cmd: list[str],
    hidden: list[str],
    mode: str,
    private_dir: Path | None = None,
    shown: Sequence[str] = (),
) -> list[str]:
    """Return the command that starts ``kernel_cmd`` as an exam kernel.

    ipykernel gets :data:`GUARD_EXTENSION`; the whole runs in new user,
    network, mount and PID namespaces, ``hidden`` folders covered by an
    unreadable tmpfs (:class:`coursehub.sandbox.command.SandboxPlan`). With
    ``private_dir`` (a new folder of the kernel's own), the kernel's private
    ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are made in it, with the
    interpreter's folders and ``shown`` (writable: the kernel's sockets, its
    work) shown again under them; pure otherwise.

    Raises
    ------
    ExamKernelError
        ``mode`` is not ``"userns"`` or ``"root"`` (no namespaces here).
    """
    if mode not in ("userns", "root"):
        raise ExamKernelError(
            "this host allows no user namespaces, so an exam kernel cannot be cut from the "
            "network: allow them (sysctl user.max_user_namespaces, "
            "kernel.unprivileged_userns_clone on Debian) or hold the exam elsewhere"
        )
    cmd = list(kernel_cmd)
    if is_ipykernel(cmd):
        cmd.append(f"--IPKernelApp.extensions={GUARD_EXTENSION}")
    # "userns" as root too: the kernel keeps the server's account, inside a user namespace
    if private_dir is None:
        return plan_sandbox_command(cmd, SandboxPlan(mode="userns", hidden=tuple(hidden)))
    from coursehub.sandbox.folders import hidden_paths, plan_private
    from coursehub.sandbox.plan import interpreter_paths, private_folders

    python = Path(kernel_cmd[0]).resolve().parent.parent if kernel_cmd else None
    needed = [*interpreter_paths(), *([str(python)] if python else [])]
    exposures = plan_private(private_folders(private_dir, None), [*needed, *shown], shown)
    again = [path for exposure in exposures for path in exposure.paths]
    plan = SandboxPlan(
        mode="userns",
        hidden=tuple(hidden_paths(hidden, shown, [e.cover for e in exposures], again)),
        exposures=tuple(exposures),
        stage_dir=str(private_dir / "stage") if exposures else "",
    )
    return plan_sandbox_command(cmd, plan)


class ExamKernelManager(AsyncIOLoopKernelManager):
    """A kernel manager whose kernels have no network and refuse shell escapes (see the module)."""

    allowed_imports = Unicode(
        "", help="Allowed top-level imports, comma-separated ('' for no list)."
    ).tag(config=True)
    exam_home = Unicode("", help="The exam home (its modules are the student's code).").tag(
        config=True
    )
    hidden = List(
        Unicode(), help="Folders the kernel must not see (course homes): covered by a tmpfs."
    ).tag(config=True)

    _socket_dir = ""
    _private_dir = ""

    async def _async_pre_start_kernel(self, **kw: Any) -> Any:
        parse_allowed_imports(self.allowed_imports)  # a bad list stops here, named
        self.transport = "ipc"
        prefix = plan_ipc_prefix(self.connection_file)
        if prefix is None:  # a long runtime folder: the sockets go to a short private one
            self._socket_dir = self._socket_dir or tempfile.mkdtemp(prefix="coursehub-exam-")
            prefix = os.path.join(self._socket_dir, "k")
        self.ip = prefix
        self.cache_ports = False
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        env = dict(kw.get("env") or os.environ)
        env[IMPORTS_VAR] = self.allowed_imports
        env[HOME_VAR] = self.exam_home or str(kw.get("cwd") or "")
        hidden = [path for path in self.hidden if Path(path).is_dir()]
        self._remove_private_dir()
        self._private_dir = tempfile.mkdtemp(prefix="coursehub-exam-private-")
        ipc = self._socket_dir or os.path.dirname(self.connection_file)
        work = [str(kw.get("cwd") or ""), self.exam_home]
        shown = [ipc, os.path.dirname(self.connection_file), *[w for w in work if w]]
        cmd = plan_exam_kernel_command(
            kernel_cmd, hidden, sandbox_mode(), Path(self._private_dir), shown
        )
        kw["env"], kw["independent"] = env, True  # no parent poller across a PID namespace
        self.log.info("exam kernel (no network) in %s", kw.get("cwd"))
        await super()._async_launch_kernel(cmd, **kw)

    def _remove_private_dir(self) -> None:
        if self._private_dir:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = ""

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        self._remove_private_dir()
        if self._socket_dir and not restart:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = ""
