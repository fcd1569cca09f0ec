"""Which hosts the course app's host may fetch a course's repository from.

A teacher names the repository; the course app's host fetches it. Without
care that is a request from inside the site to any address a teacher picks
(a port scan, a call to an internal service). So every repository host is
resolved and **each** of its addresses (IPv4 and IPv6; an IPv4-mapped,
6to4, Teredo or NAT64 IPv6 address counts as the IPv4 address it carries)
must be a global (public) address, unless the site allows it:

``COURSEHUB_MATERIAL_HOSTS`` (commas or spaces between entries):

- **names** (``gitlab.example.org``, ``*.example.org``; ``*`` for any):
  when at least one is given, a repository's host must be one of them (or
  have only addresses allowed below); without any name, any host;
- **addresses and networks** (``127.0.0.1``, ``::1``, ``10.0.0.0/8``): the
  non-public addresses a repository host may have (an internal GitLab; the
  tests' git server on 127.0.0.1). Loopback, link-local, private and other
  non-global addresses are refused unless listed here.

The check runs when the repository is set (:func:`check_repo_host`; a name
that resolves to nothing then is accepted if no listed name refuses it) and again
before each fetch (where it must resolve), whose addresses are then pinned for git
(``http.curloptResolve``, ssh's ``HostName``), so that a name resolving
elsewhere between the check and the connection is not followed. A refused
host gets one message, whatever the reason (unknown name, private address,
not listed): the teacher learns nothing about the site's internal network.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from coursehub.errors import UsageError

log = logging.getLogger(__name__)

#: The site setting: the hosts and non-public addresses a repository may come from.
HOSTS_VARIABLE = "COURSEHUB_MATERIAL_HOSTS"
#: Default ports of the schemes of a repository URL.
DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22}
_SCP_LIKE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):")
_NAME = re.compile(r"^(?:\*|(?:\*\.)?[a-z0-9_](?:[a-z0-9_.-]{0,252}))$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]


@dataclass(frozen=True)
class HostPolicy:
    """The parsed :data:`HOSTS_VARIABLE`: allowed host ``names`` and non-public ``networks``."""

    names: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()


@dataclass(frozen=True)
class Origin:
    """Where a URL connects: ``scheme``, lower-case ``host`` (no brackets) and ``port``."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_host_policy(value: str) -> HostPolicy:
    """Parse the value of :data:`HOSTS_VARIABLE` (pure).

    Raises
    ------
    UsageError
        An entry that is neither a host name (``*.`` allowed in front), an
        address nor a network.
    """
    names: list[str] = []
    networks: list[Network] = []
    for entry in re.split(r"[\s,]+", value.strip().lower()):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if not _NAME.match(entry.rstrip(".")):
            raise UsageError(
                f"{HOSTS_VARIABLE}: {entry[:60]!r} is neither a host name, an address nor a network"
            )
        names.append(entry.rstrip("."))
    return HostPolicy(tuple(names), tuple(networks))


def host_policy(environ: Mapping[str, str] | None = None) -> HostPolicy:
    """The site's policy: :data:`HOSTS_VARIABLE` of ``environ`` (default ``os.environ``).

    Raises
    ------
    UsageError
        A malformed entry (:func:`parse_host_policy`).
    """
    env = os.environ if environ is None else environ
    return parse_host_policy(env.get(HOSTS_VARIABLE, ""))


def repo_origin(url: str) -> Origin:
    """The scheme, host and port ``url`` connects to (pure); scp-like ``git@host:path`` is ssh.

    Raises
    ------
    UsageError
        If no host can be read from ``url``.
    """
    if "://" not in url:
        match = _SCP_LIKE.match(url)
        if match is None:
            raise UsageError(f"the repository URL {url[:80]!r} names no host")
        return Origin("ssh", match.group("host").lower().rstrip("."), DEFAULT_PORTS["ssh"])
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"the repository URL {url[:80]!r} has a bad port") from None
    if not parts.hostname:
        raise UsageError(f"the repository URL {url[:80]!r} names no host")
    host = parts.hostname.lower().rstrip(".")
    return Origin(scheme, host, port or DEFAULT_PORTS.get(scheme, 0))


def parse_origin(text: str) -> Origin | None:
    """Read back ``str(origin)`` (a stored credential's host); None if it is not one."""
    parts = urlsplit(text.strip())
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or port is None:
        return None
    return Origin(parts.scheme.lower(), parts.hostname.lower(), port)


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_allowed(text: str, policy: HostPolicy) -> bool:
    """Whether one resolved address may be connected to (pure): global, or listed.

    An IPv6 address carrying an IPv4 one (mapped, 6to4, Teredo, NAT64) must
    pass for both; a scope (``%eth0``) is ignored; a malformed address fails.
    """
    try:
        address: Address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    inner = _embedded_ipv4(address)
    if inner is None:
        return _one_allowed(address, policy)
    # a mapped or NAT64 address is only a way to write the IPv4 one inside: that one decides
    mapping = isinstance(address, ipaddress.IPv6Address) and (
        address.ipv4_mapped is not None or address in _NAT64
    )
    return _one_allowed(inner, policy) and (mapping or _one_allowed(address, policy))


def _one_allowed(address: Address, policy: HostPolicy) -> bool:
    listed = any(address.version == net.version and address in net for net in policy.networks)
    return listed or (address.is_global and not address.is_multicast)


def _listed(text: str, policy: HostPolicy) -> bool:
    address = ipaddress.ip_address(text.split("%", 1)[0])
    inner = _embedded_ipv4(address)
    return any(
        one.version == net.version and one in net
        for one in ([address] if inner is None else [address, inner])
        for net in policy.networks
    )


def _name_listed(host: str, names: Sequence[str]) -> bool:
    for name in names:
        if name == "*" or name == host:
            return True
        if name.startswith("*.") and host.endswith(name[1:]):
            return True
    return False


def plan_host_refusal(
    host: str, addresses: Sequence[str], policy: HostPolicy, unknown_ok: bool = False
) -> str:
    """Why ``host`` with its resolved ``addresses`` is refused, "" when allowed (pure).

    ``unknown_ok``: a name that resolves to nothing passes (when a repository
    is set: the fetch checks again). The reason is for the host's log only;
    users get :func:`refused_message`.
    """
    if not addresses:
        listed = not policy.names or _name_listed(host, policy.names)
        return "" if unknown_ok and listed else "the name does not resolve"
    bad = [a for a in addresses if not address_allowed(a, policy)]
    if bad:
        return f"non-public address {bad[0]} not in {HOSTS_VARIABLE}"
    all_listed = bool(policy.networks) and all(_listed(a, policy) for a in addresses)
    if policy.names and not _name_listed(host, policy.names) and not all_listed:
        return f"the name is not in {HOSTS_VARIABLE}"
    return ""


def refused_message(origin: Origin) -> str:
    """The one message a user gets for any refused host (never says why, see the module)."""
    return (
        f"the repository host {origin.host!r} is not allowed on this site: use a public git "
        f"host (an admin may allow others with {HOSTS_VARIABLE})"
    )


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (``getaddrinfo``, IPv4 and IPv6); [] if none."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    seen: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in seen:
            seen.append(address)
    return seen


def check_repo_host(
    url: str,
    policy: HostPolicy | None = None,
    resolver: Resolver = resolve,
    unknown_ok: bool = False,
) -> list[str]:
    """Resolve the host of ``url`` and return its addresses if the site allows them all.

    Parameters
    ----------
    url
        A repository URL already checked by :func:`coursehub.catalog.material.check_repo_url`.
    policy
        Default :func:`host_policy` (the site's :data:`HOSTS_VARIABLE`).
    resolver
        ``(host, port) -> addresses`` (default :func:`resolve`).
    unknown_ok
        Accept a name that resolves to nothing now (setting a repository
        while the name server is away; the fetch checks again).

    Raises
    ------
    UsageError
        The host is unknown, has a non-public address not allowed, or is not
        among the allowed names: one message for all (:func:`refused_message`);
        the reason goes to the log.
    """
    origin = repo_origin(url)
    policy = host_policy() if policy is None else policy
    addresses = list(resolver(origin.host, origin.port))
    reason = plan_host_refusal(origin.host, addresses, policy, unknown_ok)
    if reason:
        log.warning("repository host %s refused: %s", origin, reason)
        raise UsageError(refused_message(origin))
    return addresses
