"""Hub-managed services that end with the hub that started them, even one killed with SIGKILL.

JupyterHub starts a managed service (``c.JupyterHub.services`` with a
``command``) as a child process and stops it when it shuts down; a hub killed
with SIGKILL (or by the kernel's OOM killer) stops nothing, so the course app
and the idle culler lived on: the next hub's course app could not bind its
port ("Address already in use"), the old one went on serving the code it had
loaded, and two idle cullers ran. The rendered configuration starts each
service through this module: ``python -m coursehub.spawn.hubservice HUB_PID
-- COMMAND...`` asks the kernel to send it SIGTERM when its parent dies
(``prctl(PR_SET_PDEATHSIG)``, prctl(2); kept across ``execve``), checks that
its parent is still the hub ``HUB_PID`` (the hub may have died in between),
then becomes ``COMMAND`` (``execvp``). Under systemd the hub's unit stops its
services anyway (``KillMode=control-group``); this covers a hub started by hand.

``prctl(PR_SET_PDEATHSIG)`` is cleared when a process changes its user id,
so a service that switches user itself (a ``"user"`` key runs JupyterHub's
``setuid`` before this module, which is fine; a command that runs ``setpriv``
or ``sudo`` is not covered).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
PR_SET_PDEATHSIG = 1
#: The signal a service gets when its hub dies: the services stop cleanly on it.
HUB_DEATH_SIGNAL = signal.SIGTERM
USAGE = "usage: python -m coursehub.spawn.hubservice HUB_PID -- COMMAND [ARG...]"


def ends_with_hub(command: Sequence[str], hub_pid: int | None = None) -> list[str]:
    """Return ``command`` started through this module, bound to the hub ``hub_pid``.

    ``hub_pid`` defaults to this process (the rendered ``jupyterhub_config.py``
    runs in the hub process that starts the services).
    """
    pid = os.getpid() if hub_pid is None else hub_pid
    return [sys.executable, "-m", __name__, str(pid), "--", *command]


def set_parent_death_signal(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent thread ends (prctl(2)).

    Raises
    ------
    OSError
        If the kernel refuses (not Linux, or ``prctl`` failed).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Bind this process to the hub's life, then ``execvp`` the service's command.

    Returns 2 on a malformed command line and 1 when the hub is already gone
    (each with one line on stderr); on success it does not return.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--" or not args[0].isdigit():
        print(USAGE, file=sys.stderr)
        return 2
    hub_pid, command = int(args[0]), args[2:]
    set_parent_death_signal(HUB_DEATH_SIGNAL)
    if os.getppid() != hub_pid:
        print(
            f"hub service {command[0]}: its hub (pid {hub_pid}) is gone, not starting",
            file=sys.stderr,
        )
        return 1
    os.execvp(command[0], command)
    return 1  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
