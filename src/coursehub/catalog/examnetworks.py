"""An exam's allowed address ranges: where students may start it from (the room's network).

Stored on the exam (``exams.allowed_networks``, migration ``0015``) as
comma-separated networks in CIDR notation (``192.0.2.0/24, 2001:db8::/32``),
parsed by Python's :mod:`ipaddress` (RFC 4632 for IPv4 prefixes, RFC 4291
for IPv6). None: anywhere. A start from outside is refused and recorded
(:func:`coursehub.catalog.examproctor.note_outside_start`), so the proctor
sees who tried from where.
"""

from __future__ import annotations

import ipaddress

from coursehub.errors import UsageError

#: Most networks one exam may list.
MAX_NETWORKS = 64


def parse_networks(text: str | None) -> str | None:
    """Return ``" 192.0.2.7/24 ,10.0.0.0/8"`` as ``"192.0.2.0/24,10.0.0.0/8"``; None for none.

    A host address alone (``192.0.2.7``) is that one address (``/32``, ``/128``);
    host bits set in a prefix are cleared (``strict=False``).

    Raises
    ------
    UsageError
        ``allowed_networks``: an entry that is not an IPv4 or IPv6 network, or
        more than :data:`MAX_NETWORKS` of them.
    """
    entries = [entry.strip() for entry in (text or "").split(",") if entry.strip()]
    if len(entries) > MAX_NETWORKS:
        raise UsageError(f"allowed_networks: at most {MAX_NETWORKS} networks, got {len(entries)}")
    networks = []
    for entry in entries:
        try:
            networks.append(str(ipaddress.ip_network(entry, strict=False)))
        except ValueError:
            raise UsageError(
                f"allowed_networks: {entry!r} is not a network "
                "such as 192.0.2.0/24 or 2001:db8::/32"
            ) from None
    return ",".join(dict.fromkeys(networks)) or None


def address_allowed(networks: str | None, address: str | None) -> bool:
    """Whether ``address`` (text, IPv4 or IPv6) is in one of ``networks`` (None: any address).

    An address that cannot be read (None, empty, a name) is outside every list.
    An IPv4 address mapped into IPv6 (``::ffff:192.0.2.7``) counts as its IPv4 one.
    """
    if not networks:
        return True
    try:
        ip = ipaddress.ip_address((address or "").strip())
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in ipaddress.ip_network(net) for net in networks.split(","))
