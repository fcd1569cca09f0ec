"""Memory sizes and durations as people write them: ``4G``, ``512M``, ``30m``, ``90s``.

Memory follows JupyterHub's ``ByteSpecification`` (``jupyterhub/traitlets.py``):
an integer is a number of bytes; a number followed by one of the suffixes
K, M, G, T means that many KiB, MiB, GiB or TiB (powers of 1024).
"""

from __future__ import annotations

import math
import re

from coursehub.errors import UsageError

#: Suffix -> bytes, as in JupyterHub's ByteSpecification.UNIT_SUFFIXES.
MEM_SUFFIXES: dict[str, int] = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

#: Suffix -> seconds for durations.
DURATION_SUFFIXES: dict[str, int] = {"s": 1, "m": 60, "h": 3600, "d": 86400}

_MEM_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGTkmgt]?)\s*$")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$")


def parse_mem(text: str | int) -> int:
    """Return the number of bytes in a memory specification such as ``"4G"``.

    Parameters
    ----------
    text
        An integer (bytes), a digit string (bytes), or a number with a suffix
        K, M, G or T (powers of 1024; lower case accepted): ``"1.5G"`` is
        1,610,612,736 bytes.

    Returns
    -------
    int
        Bytes, >= 1 (fractions of a byte are truncated, as JupyterHub does).

    Raises
    ------
    UsageError
        If the text is not of that form or gives less than one byte.
    """
    if isinstance(text, bool):
        raise UsageError(f"memory size must be bytes or a number with K, M, G or T, got {text!r}")
    if isinstance(text, int):
        mem_bytes = text
    else:
        match = _MEM_RE.match(str(text))
        if match is None:
            raise UsageError(
                f"memory size must be bytes or a number with K, M, G or T (e.g. 4G), got {text!r}"
            )
        number, suffix = match.groups()
        mem_bytes = int(float(number) * MEM_SUFFIXES.get(suffix.upper(), 1))
    if mem_bytes < 1:
        raise UsageError(f"memory size must be at least 1 byte, got {text!r}")
    return mem_bytes


def format_mem(mem_bytes: int) -> str:
    """Return the shortest specification that :func:`parse_mem` reads back exactly.

    ``format_mem(2 * 1024**3) == "2G"``, ``format_mem(1536 * 1024**2) == "1536M"``,
    ``format_mem(1000) == "1000"``.
    """
    for suffix in ("T", "G", "M", "K"):
        unit = MEM_SUFFIXES[suffix]
        if mem_bytes % unit == 0:
            return f"{mem_bytes // unit}{suffix}"
    return str(mem_bytes)


def parse_optional_mem(value: str | int | None, field_name: str) -> int | None:
    """Return :func:`parse_mem` of ``value``, None when it is None or blank.

    Raises
    ------
    UsageError
        Naming ``field_name`` and the value, when it is not a memory size.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return parse_mem(value.strip() if isinstance(value, str) else value)
    except UsageError as exc:
        raise UsageError(f"{field_name}: {exc}") from None


def describe_mem(mem_bytes: float) -> str:
    """Return a memory size for people, one decimal, binary units: ``"2.0 GiB"``."""
    value = float(mem_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def parse_duration(text: str | float) -> float:
    """Return the seconds in a duration such as ``"30m"``, ``"90s"``, ``"1.5h"`` or ``"45"``.

    Parameters
    ----------
    text
        A number of seconds, or a number followed by s, m, h or d.

    Returns
    -------
    float
        Seconds, > 0.

    Raises
    ------
    UsageError
        If the text is not of that form or is not a positive finite duration.
    """
    if isinstance(text, bool):
        raise UsageError(f"duration must be a number with s, m, h or d, got {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        match = _DURATION_RE.match(str(text))
        if match is None:
            raise UsageError(
                f"duration must be a number with s, m, h or d (e.g. 30m, 90s), got {text!r}"
            )
        number, suffix = match.groups()
        seconds = float(number) * DURATION_SUFFIXES.get(suffix, 1)
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"duration must be positive, got {text!r}")
    return seconds


def describe_duration(seconds: float) -> str:
    """Return a duration for people: ``"30 s"``, ``"2.5 s"``, ``"30 min"``, ``"1.5 h"``."""
    if seconds < 60:
        return f"{seconds:g} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"
