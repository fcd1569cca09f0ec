"""The exam kernel's refusals: shell escapes and imports outside the exam's list, with one line.

Loaded into an exam's IPython kernel as an extension
(``--IPKernelApp.extensions=coursehub.examroom.guard``, added by
:class:`coursehub.examroom.kernelmanager.ExamKernelManager`), it

- replaces IPython's ``!cmd`` and ``!!cmd`` (``InteractiveShell.system``
  and ``getoutput``) and the magics that run other programs (``%%bash``,
  ``%%sh``, ``%%script``, ``%system``, ``%sx``, ``%pip``...: :data:`SHELL_MAGICS`)
  by a refusal shown as one ``UsageError`` line;
- adds an audit hook (PEP 578, :func:`sys.addaudithook`) refusing the
  events that start another program: ``subprocess.Popen``, ``os.system``,
  ``os.exec``, ``os.posix_spawn``, ``os.spawn``, ``os.fork`` and
  ``os.forkpty`` (``pty.spawn`` and ``pty.fork`` go through them), and the
  libc symbols that would do it through :mod:`ctypes` (``ctypes.dlsym``); the
  event names are those of Python's audit events table
  (https://docs.python.org/3/library/audit_events.html);
- with an allowed-imports list (``COURSEHUB_EXAM_IMPORTS``, comma-separated
  top-level names), refuses an ``import`` of a name outside the list and
  outside the standard library (:data:`sys.stdlib_module_names`) asked by the
  student's code: the notebook (``__main__``) or a module of the exam home.
  A package on the list imports what it needs.

This is the **message layer**: it tells a student, in one line, that the exam
does not allow this. It is not the boundary. Code can get around an audit hook
(PEP 578 says so: hooks are not a sandbox); what holds is the kernel's
unprivileged account and its namespaces (no network:
:mod:`coursehub.examroom.kernelmanager`), and the exam home's permissions.
An audit hook cannot be removed once added (PEP 578).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Collection, Iterable
from types import FrameType
from typing import Any

#: The variable holding the exam's allowed imports (comma-separated top-level names).
IMPORTS_VAR = "COURSEHUB_EXAM_IMPORTS"
#: The variable holding the exam home (a module there is the student's code).
HOME_VAR = "COURSEHUB_EXAM_HOME"

#: The first words of every refusal.
REFUSAL = "Not allowed during this exam"

#: Audit events (Python's audit events table) that start another program.
PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.startfile",
    }
)
#: libc symbols that start programs, refused when looked up through ctypes (``ctypes.dlsym``).
LIBC_PROCESS_SYMBOLS = frozenset(
    {"system", "popen", "fork", "vfork", "posix_spawn", "posix_spawnp"}
    | {"execl", "execle", "execlp", "execv", "execve", "execvp", "execvpe", "fexecve"}
)
#: IPython magics that run another program or install packages.
SHELL_MAGICS = (
    "bash",
    "sh",
    "script",
    "system",
    "sx",
    "sc",
    "perl",
    "ruby",
    "python2",
    "python3",
    "pypy",
    "pip",
    "conda",
    "mamba",
    "micromamba",
    "uv",
)


class ExamRefusalError(PermissionError):
    """An action the exam does not allow (shown as one line by the kernel)."""


#: Why a program is refused, in the refusal's line.
NO_PROGRAMS = "no shell, no other programs; only your notebook's Python"


def refusal_line(what: str, why: str = NO_PROGRAMS) -> str:
    """Return the one line a refused ``what`` shows: ``"Not allowed during this exam: ..."``."""
    return f"{REFUSAL}: {what} ({why})."


def parse_allowed_imports(text: str | None) -> frozenset[str] | None:
    """Return the allowed top-level names of ``"numpy, pandas"``; None for no list (all allowed).

    Raises
    ------
    ValueError
        A name that is not a Python identifier (``"numpy, sci-py"``), named.
    """
    if text is None or not text.strip():
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if not name.isidentifier():
            raise ValueError(f"{IMPORTS_VAR}: {name!r} is not a module name")
    return frozenset(names)


def event_refused(event: str, args: tuple[Any, ...]) -> str | None:
    """Return what an audit ``event`` with ``args`` does when the exam refuses it, else None."""
    if event in PROCESS_EVENTS:
        return event
    if event == "ctypes.dlsym" and len(args) > 1 and str(args[1]) in LIBC_PROCESS_SYMBOLS:
        return f"ctypes {args[1]}"
    return None


def import_refused(
    name: str, allowed: Collection[str] | None, requester: str, preloaded: Collection[str] = ()
) -> bool:
    """Whether the import of module ``name`` asked by module ``requester`` is refused.

    Only the student's code (``requester`` "__main__" or "exam-home") is
    judged; a name whose top level is in ``allowed``, in the standard
    library, or was loaded before the list applied (``preloaded``) is allowed.
    """
    if allowed is None or requester not in ("__main__", "exam-home"):
        return False
    top = name.partition(".")[0]
    return top not in allowed and top not in sys.stdlib_module_names and top not in preloaded


def requester_of(frame: FrameType | None, home: str) -> str:
    """Return who asks for an import: the first frame outside importlib's machinery.

    ``"exam-home"`` for a module under ``home``, else the frame's ``__name__``.
    """
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        filename = frame.f_code.co_filename
        if not (module.startswith("importlib") or filename.startswith("<frozen importlib")):
            if home and filename.startswith(home.rstrip("/") + "/"):
                return "exam-home"
            return module
        frame = frame.f_back
    return ""


def make_audit_hook(
    allowed: Collection[str] | None, home: str, preloaded: Iterable[str]
) -> Callable[[str, tuple[Any, ...]], None]:
    """Return the audit hook refusing :data:`PROCESS_EVENTS` and imports outside ``allowed``."""
    loaded = frozenset(preloaded)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        what = event_refused(event, args)
        if what is not None:
            raise ExamRefusalError(refusal_line(what))
        if event == "import" and allowed is not None:
            name = str(args[0])
            if import_refused(name, allowed, requester_of(sys._getframe(1), home), loaded):
                raise ExamRefusalError(
                    refusal_line(f"import {name}", f"this exam allows {_listed(allowed)}")
                )

    return hook


def _listed(allowed: Collection[str]) -> str:
    return (
        ", ".join(sorted(allowed)) + " and the standard library"
        if allowed
        else "the standard library"
    )


def install_shell_refusals(shell: Any) -> None:
    """Refuse ``!cmd``, ``!!cmd`` and :data:`SHELL_MAGICS` in an IPython ``shell`` (one line)."""
    from IPython.core.error import UsageError

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*_args: Any, **_kwargs: Any) -> Any:
            raise UsageError(refusal_line(what))

        return refused

    shell.system = refuse("!command")
    shell.getoutput = refuse("!!command")
    magics = shell.magics_manager.magics
    for name in SHELL_MAGICS:
        for kind in ("line", "cell"):
            magics[kind].pop(name, None)
        shell.register_magic_function(refuse(f"%{name}"), "line", name)
        shell.register_magic_function(refuse(f"%%{name}"), "cell", name)
    shell.set_custom_exc((ExamRefusalError,), _show_refusal)


def _show_refusal(
    shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None
) -> list[str]:
    # IPython's custom exception handler (InteractiveShell.set_custom_exc): one line, no
    # traceback; run_code drops what it returns, so it shows the line itself
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def load_ipython_extension(shell: Any) -> None:
    """IPython's extension entry point: install the refusals in ``shell``, then the audit hook.

    Raises
    ------
    ValueError
        ``COURSEHUB_EXAM_IMPORTS`` holds something that is not a module name.
    """
    allowed = parse_allowed_imports(os.environ.get(IMPORTS_VAR))
    install_shell_refusals(shell)
    sys.addaudithook(make_audit_hook(allowed, os.environ.get(HOME_VAR, ""), list(sys.modules)))
