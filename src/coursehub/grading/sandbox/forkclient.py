"""A grading worker's side of its kernel fork server (:mod:`~coursehub.grading.sandbox.forkserver`).

A grading worker (:mod:`coursehub.grading.sandbox.worker`) with
``$COURSEHUB_GRADING_FORK_SERVER`` true (the default) starts one fork server
at its first kernel and keeps it for the batch: each submission's kernel is
then forked from a process that has imported ``ipykernel``, numpy and torch
already, instead of a new interpreter importing them (about 2 s a
submission). :class:`coursehub.grading.sandbox.kernel.SandboxKernelManager`
asks :func:`fork_server` for it. A formgrader keeps one the same way for
its "autograde" button
(:func:`coursehub.grading.sandbox.kernel.fork_kernels_in_this_process`).

The server's sandbox is the one every kernel of the course gets
(:func:`coursehub.sandbox.plan.make_plan` with the course's hidden folders:
sandbox account, mount, network and PID namespaces, no GPU device), plus a
private ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (folders of its own folder
bound over them, :func:`coursehub.sandbox.plan.private_folders`, as every
sandboxed job gets), emptied after each kernel. Its own folder,
``/var/tmp/coursehub-grading/fork-<pid>-*`` (as root;
``/var/tmp/coursehub-fork-<pid>-*`` otherwise), holds the kernels' private folders (``jobs/``, as
:func:`coursehub.sandbox.workdir.make_job_dir` makes them) and is removed
with the server.

The server talks to the worker on one end of a socket pair it inherits: a
kernel of the same uid cannot open it (nothing in the file system, and the
server is non-dumpable, so ``/proc/PID/fd`` is closed to it).
:class:`ForkedKernel` stands for the forked kernel where jupyter_client
expects a ``Popen`` (poll, wait, signals), through the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError

#: The setting: fork each kernel from a server (true, the default) or start a new interpreter.
FORK_VAR = "COURSEHUB_GRADING_FORK_SERVER"
#: Parent of the servers' folders as root (mode 0711, root's).
ROOT_FORK_DIR = Path("/var/tmp/coursehub-grading")
#: Seconds a server may take to import its libraries before it is given up.
READY_S = 120.0


def fork_wanted(environ: Any = None) -> bool:
    """Return whether ``$COURSEHUB_GRADING_FORK_SERVER`` asks for fork servers (default true).

    Raises
    ------
    UsageError
        If the variable is not ``true``/``false`` (``1``/``0``, ``yes``/``no``).
    """
    from coursehub.errors import UsageError

    text = (os.environ if environ is None else environ).get(FORK_VAR, "").strip().lower()
    if text in ("", "1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{FORK_VAR} must be true or false, got {text!r}")


def make_server_dir() -> Path:
    """Return a new folder for one fork server (0711 as root, 0700 otherwise; see above)."""
    from coursehub.sandbox.workdir import sweep_job_dirs

    if os.geteuid() == 0:
        parent, prefix = ROOT_FORK_DIR, "fork-"
        with contextlib.suppress(FileExistsError):
            ROOT_FORK_DIR.mkdir(mode=0o711)
        info = ROOT_FORK_DIR.lstat()
        if not ROOT_FORK_DIR.is_dir() or ROOT_FORK_DIR.is_symlink() or info.st_uid != 0:
            raise CoursehubError(f"{ROOT_FORK_DIR} must be a folder owned by root")
        os.chmod(ROOT_FORK_DIR, 0o711)
    else:
        parent, prefix = Path("/var/tmp"), "coursehub-fork-"
    sweep_job_dirs(parent, prefix)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    os.chmod(folder, 0o711)
    return folder


class ForkedKernel:
    """A kernel forked by the server, as jupyter_client's ``LocalProvisioner`` uses a ``Popen``."""

    stdin = stdout = stderr = None

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Return the kernel's exit status once the server has reported it, else None."""
        if self.returncode is None:
            message = self.server.receive(timeout_s=0)
            if message is not None and message.get("op") == "exited":
                self.returncode = int(message["code"])
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the kernel's exit (and the server's clean-up after it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("forked kernel", timeout or 0)
            message = self.server.receive(timeout_s=0.1 if left is None else min(left, 0.1))
            if message is not None and message.get("op") == "exited":
                self.returncode = int(message["code"])
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Have the server send ``signum`` to the kernel."""
        if self.returncode is None:
            self.server.send({"op": "signal", "signum": int(signum)})

    def kill(self) -> None:
        """SIGKILL the kernel."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the kernel."""
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """One fork server of this worker: its process, folder and socket."""

    def __init__(self, hidden: Sequence[str], account_name: str, mode: str) -> None:
        from coursehub.sandbox.command import plan_sandbox_command
        from coursehub.sandbox.env import plan_sandbox_env

        self.key = (tuple(hidden), account_name, mode)
        self.folder = make_server_dir()
        self.jobs = self.folder / "jobs"
        self.jobs.mkdir(mode=0o711)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        try:
            plan = self._plan(hidden, account_name, mode)
            cmd = [sys.executable, "-m", "coursehub.grading.sandbox.forkserver"]
            cmd += ["--fd", str(theirs.fileno())]
            for exposure in plan.exposures:
                if exposure.source:  # a private /tmp: emptied after each kernel, but its paths
                    cmd += ["--scratch", exposure.cover]
                    cmd += [f"--keep={path}" for path in exposure.paths]
            log = os.open(self.folder / "server.log", os.O_WRONLY | os.O_CREAT, 0o600)
            with contextlib.closing(os.fdopen(log, "wb")) as output:
                self.process = subprocess.Popen(
                    plan_sandbox_command(cmd, plan),
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    env={**plan_sandbox_env(os.environ), "HOME": str(self.folder)},
                    cwd=self.folder,
                    pass_fds=[theirs.fileno()],
                    start_new_session=True,
                )
            theirs.close()
            ready = self.receive(timeout_s=READY_S)
            if ready is None or ready.get("op") != "ready" or ready.get("threads") != 1:
                text = (self.folder / "server.log").read_text(errors="replace")[-2000:]
                raise CoursehubError(f"the kernel fork server did not start: {ready} {text}")
        except BaseException:
            theirs.close()
            self.close()
            raise

    def _plan(self, hidden: Sequence[str], account_name: str, mode: str) -> Any:
        from coursehub.sandbox.plan import make_plan

        (self.folder / "stage").mkdir(mode=0o700)
        return make_plan(
            hidden,
            keep=[self.folder],
            stage_dir=self.folder / "stage",
            account_name=account_name,
            mode=mode,
            private_dir=self.folder,
        )

    def job_dir(self) -> Path:
        """Return a new private folder for one kernel, in the server's ``jobs/`` (0700)."""
        return Path(tempfile.mkdtemp(prefix="job-", dir=self.jobs))

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        """Send one request (``fds`` passed along: the kernel's log)."""
        socket.send_fds(self.sock, [json.dumps(message).encode()], list(fds))

    def receive(self, timeout_s: float | None) -> dict[str, Any] | None:
        """Return the server's next message, None if none came within ``timeout_s``.

        Raises
        ------
        CoursehubError
            If the server has ended.
        """
        self.sock.settimeout(timeout_s)
        try:
            data = self.sock.recv(1 << 16)
        except (TimeoutError, BlockingIOError):
            return None
        if not data:
            raise CoursehubError("the kernel fork server ended")
        message: dict[str, Any] = json.loads(data)
        return message

    def start_kernel(self, connection_file: str, cwd: str, env: dict[str, str]) -> ForkedKernel:
        """Fork one kernel (its output on this process's file descriptor 1: the request's log)."""
        request = {"op": "start", "connection_file": connection_file, "cwd": cwd, "env": env}
        self.send(request, [1])
        answer = self.receive(timeout_s=READY_S)
        if answer is None or answer.get("op") != "started":
            raise CoursehubError(f"the kernel fork server did not fork: {answer}")
        return ForkedKernel(self, int(answer["pid"]))

    def alive(self) -> bool:
        """Whether the server still runs."""
        return self.process.poll() is None if hasattr(self, "process") else False

    def close(self) -> None:
        """End the server (end of file on its socket, then SIGKILL) and remove its folder."""
        with contextlib.suppress(OSError):
            self.sock.close()
        process = getattr(self, "process", None)
        if process is not None:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


#: This worker's fork server (one at a time; see :func:`fork_server`).
_SERVER: list[ForkServer] = []
#: Why a server could not start, by (hidden folders, account, mode): not tried again.
_FAILED: dict[tuple[Any, ...], str] = {}


def fork_server(hidden: Sequence[str], account_name: str, mode: str) -> ForkServer:
    """Return this worker's fork server for these hidden folders, account and mode.

    Started at the first call, kept while the same course's kernels ask for
    it; a server that ended (or of another course) is replaced.

    Raises
    ------
    CoursehubError
        If it cannot start (then, and for every later call with the same
        folders, account and mode: the kernels start as without it).
    """
    key = (tuple(hidden), account_name, mode)
    if key in _FAILED:
        raise CoursehubError(_FAILED[key])
    if _SERVER and (_SERVER[0].key != key or not _SERVER[0].alive()):
        close_fork_server()
    if not _SERVER:
        try:
            _SERVER.append(ForkServer(hidden, account_name, mode))
        except CoursehubError as exc:
            _FAILED[key] = str(exc)
            raise
    return _SERVER[0]


def close_fork_server() -> None:
    """End this worker's fork server, if any."""
    while _SERVER:
        _SERVER.pop().close()
