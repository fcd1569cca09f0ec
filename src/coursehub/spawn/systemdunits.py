"""Unit names of students' servers, and what to clear before one starts (pure).

- One unit per server (jupyterhub/systemdspawner#73): SystemdSpawner expands
  only ``{USERNAME}`` and ``{USERID}`` in ``unit_name_template``, so a named
  server (a second course's, beside the default one) gets the default
  server's unit name, and starting it stops the other. :func:`server_unit_name`
  adds the server's name, escaped (:func:`escape_unit_part`) so that ``-``
  never appears in it and no two servers share a name.
- A unit left over (jupyterhub/systemdspawner#7, #87): after a kill or a hub
  crash the unit may be ``failed`` (kept loaded with its ``Result`` until
  ``systemctl reset-failed``) or still stopping; ``systemd-run --unit`` then
  refuses the name. :func:`plan_unit_clearing` says what to run first.
"""

from __future__ import annotations

import hashlib

#: Longest unit name systemd takes, suffix included (UNIT_NAME_MAX, 256 with the NUL).
UNIT_NAME_MAX = 255
#: Characters kept as they are in an escaped name (besides ASCII letters and digits).
KEPT = frozenset("_.")
#: The states of a unit that still has (or may have) processes (systemctl(1), "ActiveState").
RUNNING_STATES = frozenset({"active", "activating", "deactivating", "reloading", "refreshing"})


def escape_unit_part(text: str) -> str:
    """Return ``text`` escaped for a unit name: ``:`` and two hex digits per other byte (pure).

    ASCII letters, digits, ``_`` and ``.`` are kept; every other byte of the
    UTF-8 form becomes ``:xx`` (``"tp-2"`` gives ``"tp:2d2"``). Unit names
    take ``:`` (systemd.unit(5)). Not ``systemd-escape``'s ``\\xNN``: systemd
    unescapes a backslash in ``EnvironmentFile=`` (systemd.exec(5), quoting),
    so the environment file SystemdSpawner names after the unit would not be
    found (measured on systemd 252: the unit fails with result ``resources``).
    """
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if byte < 128 and (char.isalnum() or char in KEPT):
            out.append(char)
        else:
            out.append(f":{byte:02x}")
    return "".join(out)


def server_unit_name(template: str, username: str, user_id: int, server_name: str) -> str:
    """Return the unit name of one server of a user (pure).

    Parameters
    ----------
    template : str
        ``SystemdSpawner.unit_name_template``; ``{USERNAME}``, ``{USERID}`` and
        ``{SERVERNAME}`` (escaped, "" for the default server) are expanded.
    server_name : str
        The server's name; "" for the default server, whose name stays the template's.

    Returns
    -------
    str
        Without ``{SERVERNAME}`` in the template, a named server's unit is the
        default's name, ``-`` and its escaped name (no ``-`` in it: unique).
        An escaped name that would pass :data:`UNIT_NAME_MAX` is replaced by
        ``h`` and 16 hex digits of its SHA-256.
    """
    escaped = escape_unit_part(server_name) if server_name else ""
    base = template.format(USERNAME=username, USERID=user_id, SERVERNAME=escaped)
    if not server_name or "{SERVERNAME}" in template:
        return base
    name = f"{base}-{escaped}"
    if len(name) + len(".service") > UNIT_NAME_MAX:
        name = f"{base}-h{hashlib.sha256(server_name.encode()).hexdigest()[:16]}"
    return name


def plan_unit_clearing(unit: str, active_state: str) -> list[list[str]]:
    """Return the ``systemctl`` argument lists that free ``unit``'s name before a start (pure).

    ``active_state`` is ``systemctl show --property=ActiveState --value UNIT``:
    ``failed`` is reset (``reset-failed``); a unit that still runs or is
    stopping, which the hub no longer counts as running, is stopped then reset
    (a stop that ends in a kill leaves it failed); ``inactive`` or an unknown
    unit needs nothing.
    """
    if active_state == "failed":
        return [["reset-failed", unit]]
    if active_state in RUNNING_STATES:
        return [["stop", unit], ["reset-failed", unit]]
    return []
