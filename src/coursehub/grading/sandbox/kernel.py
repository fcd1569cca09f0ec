"""nbgrader with the student's kernel sandboxed: ``python -m coursehub.grading.sandbox.kernel``.

The command line is nbgrader's (``autograde ps1 --student=S ...``); the only
change is in nbgrader's ``Execute`` preprocessor, replaced by
:class:`SandboxExecute`, whose kernels are started by
:class:`SandboxKernelManager` (nbclient ``NotebookClient.kernel_manager_class``;
nbgrader 0.9 sets it in ``Execute.__init__``, so a subclass is the way to
change it). For each notebook it

1. makes a private folder (mode 0700, in ``/tmp/coursehub-grading``, mode
   0711 and owned by root, when root), holding the connection file, the
   kernel's sockets, a ``home`` and ``work``: a copy of the folder nbgrader
   would have run the kernel in (the submission's files);
2. starts the kernel with transport ``ipc`` (Unix sockets: they work across
   network namespaces, TCP on 127.0.0.1 does not), an environment from
   :func:`coursehub.sandbox.env.plan_sandbox_env`, ``cwd`` = that copy,
   through :func:`coursehub.sandbox.plan.make_plan` (sandbox account,
   namespaces, no GPU device, a private ``/tmp``, ``/var/tmp`` and
   ``/dev/shm``: see :mod:`coursehub.sandbox`);
3. removes the folder once the kernel has been shut down.

nbgrader then writes the autograded notebook and the gradebook itself,
after the kernel has exited, in this (trusted) process.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import DeadKernelError
from nbgrader.preprocessors import Execute
from traitlets import Bool, DottedObjectName, List, Type, Unicode, default
from traitlets.config import Config

from coursehub.errors import CoursehubError
from coursehub.grading.autograde.cells import CellRef, kernel_died_line
from coursehub.sandbox.account import SandboxAccount
from coursehub.sandbox.command import SandboxPlan, chown_tree, plan_sandbox_command, sandbox_mode
from coursehub.sandbox.env import plan_sandbox_env, sandbox_required
from coursehub.sandbox.plan import make_plan, sandbox_account
from coursehub.sandbox.workdir import make_job_dir

#: Set (one True) in a long-lived process that starts one kernel after another
#: (:func:`fork_kernels_in_this_process`): its kernels fork from a fork server by default.
_LONG_LIVED: list[bool] = []


def fork_kernels_in_this_process() -> None:
    """Fork this process's autograde kernels from one kernel fork server, kept while it lives.

    For a long-lived process that autogrades one submission at a time: the
    formgrader, whose "autograde" button grades one submission in its own
    process (nbgrader's ``NbGraderAPI.autograde``, called by a synchronous
    handler: one at a time). Its kernels then start as a grading worker's do
    (:mod:`coursehub.grading.sandbox.forkclient`: forked from a server of the
    same sandbox, with the same fallback to a new interpreter), unless
    ``$COURSEHUB_GRADING_FORK_SERVER`` is false. The server ends with the
    process (end of file on its socket; :func:`atexit.register` ends it first).
    A process that grades one submission and exits (``python -m
    coursehub.grading.sandbox.kernel``) does not call it: the server's own
    start would cost what it saves.
    """
    import atexit

    from coursehub.grading.sandbox.forkclient import close_fork_server

    if not _LONG_LIVED:
        _LONG_LIVED.append(True)
        atexit.register(close_fork_server)


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager starting the kernel in the sandbox of :mod:`coursehub.sandbox`."""

    hidden = List(
        Unicode(), help="Folders the kernel must not see (covered by an empty tmpfs)."
    ).tag(config=True)
    grader_user = Unicode(
        "", help="Unix account running the kernel as root (default: $COURSEHUB_GRADER_USER)."
    ).tag(config=True)
    fork_server = Bool(
        help="Fork the kernel from this process's kernel fork server "
        "(coursehub.grading.sandbox.forkclient). Default: in a process that "
        "called fork_kernels_in_this_process (the formgrader), "
        "$COURSEHUB_GRADING_FORK_SERVER; elsewhere false (a grading worker sets it).",
    ).tag(config=True)

    @default("fork_server")
    def _fork_server_default(self) -> bool:
        from coursehub.grading.sandbox.forkclient import fork_wanted

        return bool(_LONG_LIVED) and fork_wanted()

    # ready without jupyter_client's fixed 0.2 s wait: see coursehub.grading.sandbox.kernelclient
    client_class = DottedObjectName(
        "coursehub.grading.sandbox.kernelclient.SandboxKernelClient", config=True
    )
    client_factory = Type(
        klass="coursehub.grading.sandbox.kernelclient.SandboxKernelClient", config=True
    )

    _job_dir: Path | None = None
    _mode = "none"
    _account: SandboxAccount | None = None
    _fork: Any = None

    async def _async_pre_start_kernel(self, **kw: Any) -> Any:
        self._mode = sandbox_mode()
        if self._mode == "none" and sandbox_required(os.environ):
            raise CoursehubError(
                "this host allows no user namespaces, so this formgrader cannot sandbox the "
                "student's kernel: autograde from the course page (coursehub grading autograde)"
            )
        self._account = sandbox_account(self._mode, self.grader_user)
        self._fork = self._fork_server()
        self._job_dir = make_job_dir() if self._fork is None else self._fork.job_dir()
        self.connection_file = str(self._job_dir / "kernel.json")
        if self._mode in ("root", "userns"):
            self.transport = "ipc"
            self.ip = str(self._job_dir / "k")
            self.cache_ports = False
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        assert self._job_dir is not None
        job = self._job_dir
        work, home = job / "work", job / "home"
        source = kw.get("cwd")
        if source and Path(source).is_dir():
            shutil.copytree(source, work, symlinks=True)
        else:
            work.mkdir()
        for folder in (home, home / "tmp", job / "stage"):
            folder.mkdir(exist_ok=True)
        env = plan_sandbox_env(kw.get("env") or os.environ)
        env.update(
            {
                "HOME": str(home),
                "TMPDIR": str(home / "tmp"),
                "IPYTHONDIR": str(home / ".ipython"),
                "MPLCONFIGDIR": str(home / ".matplotlib"),
                "JUPYTER_RUNTIME_DIR": str(home / "rt"),
            }
        )
        if self._account is not None:
            env["USER"] = env["LOGNAME"] = self._account.name
            chown_tree(job, self._account.uid, self._account.gid)
        kw["env"], kw["cwd"] = env, str(work)
        if self._mode in ("root", "userns"):  # no parent poller: see plan_sandbox_command
            kw["independent"] = True
        if self._fork is not None and forkable(kernel_cmd):
            try:
                process = self._fork.start_kernel(self.connection_file, str(work), env)
            except CoursehubError as exc:
                self.log.warning("%s; starting the kernel without it", exc)
            else:
                self.log.info("sandboxed kernel (%s, forked) in %s", self._mode, work)
                provisioner: Any = self.provisioner
                provisioner.process, provisioner.pid, provisioner.pgid = process, process.pid, None
                self._reconcile_connection_info(provisioner.connection_info)
                await wait_for_sockets(self.get_connection_info(), process)
                return
        plan: SandboxPlan = make_plan(
            self.hidden,
            keep=[job],
            stage_dir=job / "stage",
            account_name=self._account.name if self._account else "",
            mode=self._mode,
            private_dir=job,
        )
        cmd = plan_sandbox_command(kernel_cmd, plan)
        self.log.info("sandboxed kernel (%s) in %s", self._mode, work)
        await super()._async_launch_kernel(cmd, **kw)

    def _fork_server(self) -> Any:
        """Return this worker's fork server if asked for and usable here, else None."""
        if not self.fork_server or self._mode not in ("root", "userns"):
            return None
        from coursehub.grading.sandbox.forkclient import close_fork_server, fork_server

        name = self._account.name if self._account else ""
        try:
            return fork_server(self.hidden, name, self._mode)
        except (CoursehubError, OSError) as exc:
            self.log.warning("no kernel fork server (%s); kernels start as usual", exc)
            close_fork_server()
            return None

    async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
        """Start the kernel; remove its private folder if it does not start."""
        try:
            await super().start_kernel(**kw)
        except BaseException:
            self._remove_job_dir()
            raise

    def _remove_job_dir(self) -> None:
        if self._job_dir is not None:
            shutil.rmtree(self._job_dir, ignore_errors=True)
            self._job_dir = None

    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:  # type: ignore[override]
        """Shut the kernel down: a forked kernel is killed at once, any other asked first.

        A graceful shutdown (``shutdown_request``, then up to
        ``shutdown_wait_time`` for the kernel to exit) gives a kernel the
        chance to save what it holds; nothing a grading kernel holds is
        kept, and once a forked kernel has exited its fork server kills every
        other process of its PID namespace and empties its ``/tmp`` and
        ``/dev/shm`` (:mod:`coursehub.grading.sandbox.forkserver`) whichever
        way it ended. Killing it spares the kernel's own shutdown (0.03-0.05 s
        measured on the 2-core machine) and any wait a submission's code
        could add to it. Other kernels (a new interpreter in its own PID
        namespace) keep jupyter_client's graceful shutdown.
        """
        from coursehub.grading.sandbox.forkclient import ForkedKernel

        forked = isinstance(getattr(self.provisioner, "process", None), ForkedKernel)
        await super().shutdown_kernel(now=now or (forked and not restart), restart=restart)

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        """Return once the kernel has exited, checking every :data:`EXIT_POLL_S` at most.

        jupyter_client's ``KernelManager._async_wait`` sleeps ``pollinterval``
        (0.1 s) between two checks, so a kernel that exits within a few
        milliseconds of its ``shutdown_request`` still costs 0.1 s. A check
        is a ``waitpid(WNOHANG)``, or for a forked kernel a non-blocking
        read of the fork server's socket.
        """
        await super()._async_wait(pollinterval=min(pollinterval, EXIT_POLL_S))

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        self._remove_job_dir()


#: Seconds between two checks of whether a kernel being shut down has exited.
EXIT_POLL_S = 0.005
#: Seconds a forked kernel may take to bind its sockets before the client connects anyway.
SOCKETS_WAIT_S = 30.0
#: The connection file's ports of a kernel's five sockets (Jupyter messaging protocol).
SOCKET_PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


async def wait_for_sockets(info: Mapping[str, Any], process: Any) -> None:
    """Return once a kernel on ``ipc`` transport has bound its five sockets, or has ended.

    ipykernel binds ``<ip>-<port>`` for each port of the connection file
    (``IPKernelApp._try_bind_socket``). A client that connects before the
    files exist is connected by ZeroMQ only at its next reconnection try
    (``ZMQ_RECONNECT_IVL``, 100 ms by default: zmq_setsockopt(3)), and its
    IOPub subscription may then miss the kernel's first status messages,
    after which jupyter_client's ``wait_for_ready`` waits 0.2 s more and asks
    again. Waiting for the files spares a forked kernel, ready within about
    0.1 s, both waits. Gives up after :data:`SOCKETS_WAIT_S` (the client's
    own timeout then applies); other transports return at once.
    """
    import asyncio
    import time

    if info.get("transport") != "ipc":
        return
    paths = [Path(f"{info['ip']}-{info[key]}") for key in SOCKET_PORTS if info.get(key)]
    deadline = time.monotonic() + SOCKETS_WAIT_S
    while not all(path.exists() for path in paths):
        if process.poll() is not None or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.005)


def forkable(kernel_cmd: list[str]) -> bool:
    """Whether ``kernel_cmd`` is this interpreter's ipykernel (what a fork server can stand for)."""
    return (
        len(kernel_cmd) >= 3
        and os.path.realpath(kernel_cmd[0]) == os.path.realpath(sys.executable)
        and kernel_cmd[1:3] == ["-m", "ipykernel_launcher"]
    )


class SandboxExecute(Execute):
    """nbgrader's ``Execute`` preprocessor with kernels from :class:`SandboxKernelManager`.

    Configured as ``Execute`` is (``c.Execute.timeout`` ... apply: traitlets
    reads the sections of the parent classes too).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess_cell(self, cell: Any, resources: Any, index: int) -> Any:
        """Execute one cell; if the kernel dies in it, log which (:func:`kernel_died_line`)."""
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            notebook = str((resources or {}).get("metadata", {}).get("name", ""))
            grade_id = str(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", ""))
            self.log.error(kernel_died_line(CellRef(notebook, index + 1, grade_id)))
            raise

    def preprocess(self, nb: Any, resources: Any = None, km: Any = None) -> Any:
        """Execute ``nb``; however it ends, remove the kernel's private folder."""
        try:
            return super().preprocess(nb, resources, km)
        finally:
            manager = getattr(self, "km", None)
            if isinstance(manager, SandboxKernelManager):
                manager._remove_job_dir()


def sandbox_config() -> Config:
    """Return the config that puts :class:`SandboxExecute` in place of ``Execute`` in autograde."""
    from nbgrader.converters.autograde import Autograde

    default = Autograde.class_traits()["autograde_preprocessors"].default()
    config = Config()
    config.Autograde.autograde_preprocessors = [
        SandboxExecute if pp is Execute else pp for pp in default
    ]
    return config


def course_sandbox_config(course_dir: str, exchange_root: str) -> Config:
    """Return the sandbox part of a course's ``nbgrader_config.py`` (read when it is loaded).

    Every autograde that reads the course's configuration, not only
    coursehub's jobs, then runs students' kernels in the sandbox: the
    formgrader's "autograde" button (nbgrader's ``NbGraderAPI.autograde``,
    in the formgrader's own process, whose environment holds its hub token)
    and ``nbgrader autograde`` run by hand in the course directory. The
    hidden folders are those of :func:`coursehub.grading.sandbox.plan.plan_hidden`,
    from the loading process's environment. Every HTML export (the
    formgrader's manual grading page, ``generate_feedback``) sanitises the
    students' outputs (:func:`coursehub.grading.studenthtml.sanitizing_config`).
    """
    from coursehub.grading.sandbox.plan import plan_hidden_paths
    from coursehub.grading.studenthtml import sanitizing_config

    config = sandbox_config()
    config.SandboxKernelManager.hidden = plan_hidden_paths(course_dir, exchange_root, os.environ)
    # the manual grading page and the feedback: students' outputs sanitised
    config.merge(sanitizing_config())
    return config


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``nbgrader`` with ``argv`` (default ``sys.argv[1:]``) and :func:`sandbox_config`."""
    from nbgrader.apps.nbgraderapp import NbGraderApp

    NbGraderApp.launch_instance(
        argv=list(sys.argv[1:] if argv is None else argv), config=sandbox_config()
    )


if __name__ == "__main__":
    main()
