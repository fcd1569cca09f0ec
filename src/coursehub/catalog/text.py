"""Which characters a stored name, e-mail or roster cell may not contain (pure).

A control character in a person's name breaks what is built from it: the
CSV grade exports, the hub and nbgrader sync, terminal output; PostgreSQL
refuses U+0000 in text outright ("text fields cannot contain NUL (0x00)
bytes") where SQLite stores it, so the catalog refuses these characters
before any database sees them and both backends give the same message.

Refused (:func:`is_forbidden_char`):

- Unicode category ``Cc``: the C0 controls U+0000-U+001F (TAB, CR and LF
  included: inside a value they are not separators), DEL U+007F and the C1
  controls U+0080-U+009F (Unicode Standard, chapter 23.1 "Control Codes");
- ``Zl``/``Zp``: LINE SEPARATOR U+2028 and PARAGRAPH SEPARATOR U+2029, line
  breaks to JavaScript and many terminals;
- the bidirectional embedding, override and isolate controls U+202A-U+202E
  and U+2066-U+2069 (Unicode Standard Annex #9), which make a name display
  as another ("Trojan Source", CVE-2021-42574).

Other format characters (ZERO WIDTH NON-JOINER U+200C...) are kept: some
scripts need them in names.
"""

from __future__ import annotations

import unicodedata

#: Bidirectional controls (UAX #9, section 2): LRE RLE PDF LRO RLO, LRI RLI FSI PDI.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Unicode categories refused anywhere in a stored value.
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Zl", "Zp", "Cs"})
#: Longest text quoted back in a message (a header, a file's first line).
QUOTE_MAX = 100


def is_forbidden_char(char: str) -> bool:
    """Return whether the one-character string ``char`` may not appear in a stored value."""
    return char in BIDI_CONTROLS or unicodedata.category(char) in FORBIDDEN_CATEGORIES


def first_forbidden_char(text: str, allowed: str = "") -> str | None:
    """Return the first character of ``text`` that :func:`is_forbidden_char` refuses, or None.

    Characters in ``allowed`` (e.g. ``"\\t\\r\\n"`` in a column that is not
    stored) are let through.
    """
    for char in text:
        if char not in allowed and is_forbidden_char(char):
            return char
    return None


def describe_char(char: str) -> str:
    """Return ``"U+0000"`` for a character, as messages name it (never the character itself)."""
    return f"U+{ord(char):04X}"


def control_char_problem(text: str, allowed: str = "") -> str | None:
    """Return ``"contains a control character (U+0000)"`` if ``text`` has one, else None."""
    char = first_forbidden_char(text, allowed)
    return None if char is None else f"contains a control character ({describe_char(char)})"


def quote_text(text: str, limit: int = QUOTE_MAX) -> str:
    """Return ``text`` safe to quote in a one-line message: forbidden characters shown as
    ``\\uXXXX``, cut to ``limit`` characters with ``...``."""
    shown = "".join(
        f"\\u{ord(c):04x}" if is_forbidden_char(c) or c in "\t\r\n" else c for c in text
    )
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
