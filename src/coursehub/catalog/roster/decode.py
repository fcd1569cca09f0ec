"""A roster file's bytes as text (pure): UTF-8, Windows-1252 or UTF-16; binary files refused.

:func:`decode_roster` is the first step of
:func:`coursehub.catalog.roster.parse.parse_roster`.
"""

from __future__ import annotations

import codecs

from coursehub.catalog.errors import RosterError
from coursehub.catalog.text import is_forbidden_char

#: Magic numbers of files people upload instead of a CSV: zip (.xlsx, .ods),
#: OLE2 (.xls), PDF, gzip.
BINARY_MAGIC = (b"PK\x03\x04", b"\xd0\xcf\x11\xe0", b"%PDF", b"\x1f\x8b")
#: A decoded file with more control characters than this share of its
#: characters is binary data, not text.
BINARY_SHARE = 0.05
NOT_TEXT = "the file is not a CSV text file (binary data; an Excel file? save it as CSV)"
#: Characters a value may hold in a column that is not stored (separators in quotes).
UNSTORED_ALLOWED = "\t\r\n"


def decode_roster(data: bytes) -> str:
    """Return the text of a roster file: UTF-8 (BOM or not), else Windows-1252.

    A file starting with a UTF-16 byte-order mark (Excel's "Unicode text"
    export) is read as UTF-16.

    Raises
    ------
    RosterError
        If the file is empty or binary: a known binary format (zip such as an
        .xlsx, .xls, PDF, gzip), broken UTF-16, neither UTF-8 nor mostly ASCII
        (:data:`HIGH_BYTES_SHARE`), or a text with more than
        :data:`BINARY_SHARE` control characters (a few stray ones are left
        for :func:`coursehub.catalog.roster.parse.parse_roster` to name by row and column).
    """
    if not data.strip():
        raise RosterError(["the file is empty"])
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # Excel's "Unicode text"
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise RosterError([NOT_TEXT]) from None
    elif data.startswith(BINARY_MAGIC):
        raise RosterError([NOT_TEXT])
    else:
        decoded = _decode_8bit(data)
        if decoded is None:
            raise RosterError([NOT_TEXT])
        text = decoded
    controls = sum(1 for c in text if c not in UNSTORED_ALLOWED and is_forbidden_char(c))
    if controls and controls > BINARY_SHARE * len(text):
        raise RosterError([NOT_TEXT])
    return text


#: A file that is not UTF-8 with more than this share of bytes above 0x7F is binary
#: data: in Windows-1252 text (Western European names, e-mails, digits) most
#: characters are ASCII, accented letters a few percent.
HIGH_BYTES_SHARE = 0.3
_HIGH_BYTES = bytes(range(0x80, 0x100))
#: Windows-1252 as browsers and Windows decode it (WHATWG Encoding Standard,
#: https://encoding.spec.whatwg.org/index-windows-1252.txt): Python's "cp1252"
#: refuses the five bytes it leaves undefined (0x81 0x8D 0x8F 0x90 0x9D), which
#: map to the C1 controls of the same number. Applied to a Latin-1 decoding.
_WINDOWS_1252 = {
    byte: bytes([byte]).decode("cp1252")
    for byte in range(0x80, 0xA0)
    if byte not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
}


def _decode_8bit(data: bytes) -> str | None:
    """UTF-8 (BOM or not), else Windows-1252 with its undefined bytes as C1 controls: one
    stray byte is then named by row and column, and the file's other text (a "€", curly
    quotes) is read as written. None for binary data: not UTF-8 and more than
    :data:`HIGH_BYTES_SHARE` of its bytes above 0x7F."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    high = len(data) - len(data.translate(None, _HIGH_BYTES))
    if high > HIGH_BYTES_SHARE * len(data):
        return None
    return data.decode("latin-1").translate(_WINDOWS_1252)
