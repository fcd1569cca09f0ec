"""The TCP ports of ``coursehub demo``, checked free before the hub starts.

The demo listens on its public port (configurable-http-proxy) and on ports of
127.0.0.1 picked free at each start: the hub's own API, the proxy's REST API,
the course app service and one formgrader per graded course. A port taken by
anything (another demo, any program) is reported at once, with the program
holding it when this user may see it, instead of a hub that never answers.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from coursehub.errors import CoursehubError

#: Address of the internal ports.
LOOPBACK = "127.0.0.1"


class PortInUseError(CoursehubError):
    """A port the demo must listen on is taken or cannot be bound."""


@dataclass(frozen=True)
class DemoPorts:
    """Every ``(ip, port)`` the demo's processes listen on.

    Attributes
    ----------
    ip, public : str, int
        The public URL (``--ip``, ``--port``), served by the proxy.
    hub, proxy_api, service : int
        The hub's API, the proxy's REST API, the course app (127.0.0.1).
    formgraders : tuple of int
        One per graded course, in the order of the courses (127.0.0.1).
    """

    ip: str
    public: int
    hub: int
    proxy_api: int
    service: int
    formgraders: tuple[int, ...] = ()

    def listening(self) -> list[tuple[str, str, int]]:
        """Return ``(what, ip, port)`` of each listening socket, the public one first."""
        found = [
            ("public URL (--port)", self.ip, self.public),
            ("hub API", LOOPBACK, self.hub),
            ("proxy API", LOOPBACK, self.proxy_api),
            ("course app", LOOPBACK, self.service),
        ]
        found += [(f"formgrader {i + 1}", LOOPBACK, p) for i, p in enumerate(self.formgraders)]
        return found


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def pick_ports(ip: str, public: int, n_formgraders: int) -> DemoPorts:
    """Return the demo's ports: ``public`` on ``ip``, the others free ones, all distinct."""
    taken = {public}
    picked: list[int] = []
    while len(picked) < 3 + n_formgraders:
        port = free_port()
        if port not in taken:
            taken.add(port)
            picked.append(port)
    return DemoPorts(ip, public, picked[0], picked[1], picked[2], tuple(picked[3:]))


def bind_problem(ip: str, port: int) -> str | None:
    """Return why ``(ip, port)`` cannot be listened on now ("in use", ...), or None.

    ``SO_REUSEADDR`` is set as node (configurable-http-proxy) and tornado set
    it: a port in TIME_WAIT is free for them, a listening one is not.
    """
    host = None if ip in ("", "*") else ip
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot resolve {ip!r} ({exc.strerror})"
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
            sock.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "already in use"
            if exc.errno == errno.EACCES:
                return "not allowed for this user (ports below 1024 need root)"
            if exc.errno == errno.EADDRNOTAVAIL:
                return f"{ip} is not an address of this machine"
            return exc.strerror or str(exc)
    return None


def holder_of(port: int) -> str:
    """Return ``" (pid N, name)"`` of a process listening on TCP ``port``, or "" when unseen."""
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                if conn.pid is None:
                    return ""
                with contextlib.suppress(psutil.Error):
                    return f" (pid {conn.pid}, {psutil.Process(conn.pid).name()})"
                return f" (pid {conn.pid})"
    return ""


def render_port_problems(problems: Sequence[tuple[str, str, int, str, str]]) -> str:
    """Return the message for ``(what, ip, port, why, holder)`` rows (pure)."""
    lines = [
        f"{what} {ip}:{port} is {why}{holder}"
        if why == "already in use"
        else f"{what} {ip}:{port}: {why}{holder}"
        for what, ip, port, why, holder in problems
    ]
    public = any(what.startswith("public") for what, *_ in problems)
    hint = (
        "choose another --port or stop the program that holds it"
        if public
        else "start the demo again (internal ports are picked at each start)"
    )
    return "cannot start the demo: " + "; ".join(lines) + f"; {hint}"


def check_ports(ports: Iterable[tuple[str, str, int]]) -> None:
    """Raise unless every ``(what, ip, port)`` can be listened on now.

    Raises
    ------
    PortInUseError
        Naming each port that is taken (and by which process, when visible).
    """
    problems = []
    for what, ip, port in ports:
        why = bind_problem(ip, port)
        if why is not None:
            holder = holder_of(port) if why == "already in use" else ""
            problems.append((what, ip, port, why, holder))
    if problems:
        raise PortInUseError(render_port_problems(problems))
