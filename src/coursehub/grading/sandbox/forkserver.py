"""The kernel fork server: heavy libraries imported once, a fresh kernel forked per submission.

``python -m coursehub.grading.sandbox.forkserver --fd N --scratch DIR ...``
runs inside the sandbox of one grading worker
(:class:`coursehub.grading.sandbox.forkclient.ForkServer` starts it through
:func:`coursehub.sandbox.command.plan_sandbox_command`: the sandbox account,
its own mount, network and PID namespaces, the course's folders hidden, a
private ``/tmp``, ``/var/tmp`` and ``/dev/shm``). It imports ``ipykernel`` and the
libraries of ``$COURSEHUB_GRADING_PRELOAD`` (default ``numpy,torch,torch._dynamo``) once,
then, for each ``start`` request read on the socket ``N`` (a Unix
``SOCK_SEQPACKET`` socket shared with the worker, never visible in the file
system), forks a child that becomes the submission's kernel
(``IPKernelApp`` with the connection file the worker wrote), and answers
``started`` then, when the kernel has exited, ``exited``.

What a forked kernel inherits is the imported modules, nothing else:

- file descriptors: the request's log as 1 and 2, ``/dev/null`` as 0, every
  other one closed (the server's socket included);
- environment, working directory and import path: the request's (the
  worker's allow-listed environment, the submission's working copy), as a
  kernel started by ``python -m ipykernel_launcher`` gets them;
- random generators reseeded from the OS (``random``, numpy's global
  generator, torch's default generator);
- threads: the server stays single-threaded (OpenMP, OpenBLAS and MKL are
  told to use 1 thread before anything is imported, and the server checks
  ``/proc/self/task`` before every fork and refuses to fork otherwise); the
  child sets the job's thread count (``COURSEHUB_N_THREADS``) itself with
  ``torch.set_num_threads`` and ``threadpoolctl``. A thread pool started
  before ``fork`` is corrupt in the child (the threads are not copied):
  PyTorch's multiprocessing notes
  (https://pytorch.org/docs/stable/notes/multiprocessing.html), pytorch
  issue 54752 (a crash after ``set_num_threads`` then fork) and PR 29006
  (OpenMP re-initialised in forked children).

Between two submissions, once the kernel has exited, the server kills every
other process of its PID namespace (kill(2) with pid -1: all it may signal
but itself and the namespace's init; a kernel's leftover daemon included,
reaped as the namespace's subreaper, ``PR_SET_CHILD_SUBREAPER``), then
empties its private ``/tmp`` and ``/dev/shm`` (``--scratch``), before it
answers ``exited``. The server never runs a student's code, and is
non-dumpable (``PR_SET_DUMPABLE`` 0, prctl(2)), so that a kernel of its uid
can neither attach to it nor read its memory or file descriptors; the
kernels are made dumpable again, as an exec'd process is.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Modules imported once by the server (comma-separated), unless the setting says otherwise;
#: ``torch._dynamo`` is what a torch optimiser imports when the first one is made (about 800
#: modules, 3 s: ``torch.optim.Optimizer.__init__`` goes through ``torch._compile``).
PRELOAD_VAR = "COURSEHUB_GRADING_PRELOAD"
DEFAULT_PRELOAD = "numpy,torch,torch._dynamo"
#: What every kernel's ``IPKernelApp.initialize`` imports besides ``ipykernel.kernelapp``:
#: ``ipykernel.debugger`` (and debugpy, about 140 modules: ``IPythonKernel.__init__``
#: imports it), IPython's completer, debugger and ``storemagic`` extension, sqlite3 (its
#: history). Imported once by the server: measured on the 2-core machine, a kernel's
#: ``initialize`` then imports 5 modules instead of 153 (0.034-0.04 s against 0.087-0.09 s,
#: fastest three of six).
KERNEL_MODULES = (
    "ipykernel.kernelapp",
    "ipykernel.debugger",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.extensions.storemagic",
    "sqlite3",
)
#: Thread-count variables of the numeric libraries, set to 1 in the server before any import.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
#: prctl(2) options.
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
#: Seconds the server waits for a killed namespace's processes to be reaped.
REAP_S = 10.0


def prctl(option: int, value: int) -> bool:
    """Call prctl(2) with one argument; return True on success."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def thread_count() -> int:
    """Return how many threads this process has (``/proc/self/task``)."""
    return len(os.listdir("/proc/self/task"))


def preload(names: Sequence[str]) -> list[str]:
    """Import ``ipykernel``'s kernel (:data:`KERNEL_MODULES`) and ``names`` single-threaded.

    Returns the ``names`` imported.
    """
    for var in THREAD_VARS:
        os.environ[var] = "1"
    for module in KERNEL_MODULES:
        importlib.import_module(module)

    loaded = []
    for name in names:
        if name.partition(".")[0] == "coursehub":  # third-party libraries only
            continue
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception as exc:  # a course without torch: its kernels import what they use
            print(f"[coursehub] fork server: {name} not preloaded: {exc}", file=sys.stderr)
    return loaded


def job_threads(env: dict[str, str]) -> int:
    """Return the job's thread count: ``COURSEHUB_N_THREADS``, else ``OMP_NUM_THREADS``, else 1."""
    for var in ("COURSEHUB_N_THREADS", "OMP_NUM_THREADS"):
        with contextlib.suppress(ValueError):
            return max(1, int(env.get(var, "")))
    return 1


def fresh_state(env: dict[str, str]) -> None:
    """In a forked kernel: reseed the generators, set the job's threads (module docstring)."""
    import random

    random.seed()
    threads = job_threads(env)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
        with contextlib.suppress(Exception):
            from threadpoolctl import threadpool_limits

            threadpool_limits(threads)
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.seed()
        torch.set_num_threads(threads)


def run_kernel(request: dict[str, Any], log_fd: int | None) -> int:
    """Become the request's kernel (in the forked child); return its exit status."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null if log_fd is None else log_fd, 1)
    os.dup2(null if log_fd is None else log_fd, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # nothing inherited but the modules
    prctl(PR_SET_DUMPABLE, 1)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    env = {str(k): str(v) for k, v in request["env"].items()}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(request["cwd"])
    if not env.get("PYTHONSAFEPATH"):  # as `python -m ipykernel_launcher` in that folder
        sys.path.insert(0, request["cwd"])
    fresh_state(env)
    from ipykernel import kernelapp

    argv = ["-f", str(request["connection_file"])]
    sys.argv = [str(Path(kernelapp.__file__).with_name("__main__.py")), *argv]
    kernelapp.IPKernelApp.launch_instance(argv=argv)
    return 0


def fork_kernel(request: dict[str, Any], fds: list[int], server: socket.socket) -> int:
    """Fork the request's kernel; return its pid (in the child: run it, never return)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        server.close()
        code = run_kernel(request, fds[0] if fds else None)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def end_leftovers(deadline_s: float = REAP_S) -> None:
    """Kill every other process of this PID namespace and reap them (kill(2), pid -1)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:  # none left, zombies included
            return
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            time.sleep(0.01)  # killed, not yet handed to this subreaper


def empty_folder(folder: Path, keep: Sequence[str] = ()) -> None:
    """Remove everything in ``folder`` but the paths ``keep`` and the folders on the way to them.

    Entries are made writable where needed; what cannot be removed is left.
    """

    def retry(function: Any, path: str, _info: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            function(path)

    kept = [Path(path) for path in keep]
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry in kept:
                continue
            on_the_way = any(entry in path.parents for path in kept)
            if on_the_way and entry.is_dir() and not entry.is_symlink():
                empty_folder(entry, keep)
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, onerror=retry)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()


def send(server: socket.socket, message: dict[str, Any]) -> None:
    """Send one message to the worker."""
    server.send(json.dumps(message).encode())


def serve(server: socket.socket, scratch: Sequence[tuple[Path, Sequence[str]]]) -> None:
    """Answer the worker's requests until it closes the socket (see the module docstring)."""
    child: int | None = None
    pidfd = -1
    while True:
        waiting: list[int] = [server.fileno(), *([pidfd] if child else [])]
        ready, _, _ = select.select(waiting, [], [])
        if child and pidfd in ready:
            status = os.waitpid(child, 0)[1]
            os.close(pidfd)
            child, pidfd = None, -1
            end_leftovers()
            for folder, keep in scratch:
                empty_folder(folder, keep)
            send(server, {"op": "exited", "code": os.waitstatus_to_exitcode(status)})
        if server.fileno() not in ready:
            continue
        data, fds, _, _ = socket.recv_fds(server, 1 << 20, 4)
        if not data:
            break
        request = json.loads(data)
        if request.get("op") == "start" and child is None:
            if thread_count() != 1:
                send(server, {"op": "refused", "why": f"{thread_count()} threads before fork"})
            else:
                child = fork_kernel(request, fds, server)
                pidfd = os.pidfd_open(child)
                send(server, {"op": "started", "pid": child})
        elif request.get("op") == "signal" and child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, int(request["signum"]))
        for fd in fds:
            os.close(fd)
    if child:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    end_leftovers()


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, make this process non-dumpable and a subreaper, preload, serve."""
    parser = argparse.ArgumentParser(prog="python -m coursehub.grading.sandbox.forkserver")
    parser.add_argument("--fd", type=int, required=True, help="the worker's socket")
    parser.add_argument("--scratch", action="append", default=[], help="folder emptied after")
    parser.add_argument("--keep", action="append", default=[], help="path of a scratch kept")
    args = parser.parse_args(argv)
    server = socket.socket(fileno=args.fd)
    prctl(PR_SET_DUMPABLE, 0)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    names = [n for n in os.environ.get(PRELOAD_VAR, DEFAULT_PRELOAD).split(",") if n.strip()]
    loaded = preload([n.strip() for n in names])
    threads = thread_count()
    send(server, {"op": "ready", "preloaded": loaded, "threads": threads})
    if threads != 1:
        return
    serve(server, [(Path(folder), args.keep) for folder in args.scratch])


if __name__ == "__main__":
    main()
