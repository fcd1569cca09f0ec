"""Read a roster CSV as university systems export it: :func:`parse_roster` (pure).

Accepted: comma, semicolon or tab separated (chosen from the header line);
UTF-8 with or without BOM, else Windows-1252 (else Latin-1), or UTF-16 with
a BOM; quoted fields;
CRLF or LF; blank lines. Headers in French or English, in any order, compared
without case, accents, spaces or punctuation ("N° étudiant" = "numero
etudiant" = "student_id"); other columns are ignored. Names keep their accents
(normalised to Unicode NFC).

Rows are numbered as in a spreadsheet (the header is row 1, unless blank
lines come before it) and columns by
letter (A, B, ...). Every problem found is reported at once in a
:class:`~coursehub.catalog.errors.RosterError`.

Planning and applying the import live in :mod:`coursehub.catalog.enrolment`.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from coursehub.catalog.errors import RosterError, ValidationError
from coursehub.catalog.people import check_email, check_username

#: Field -> header spellings, compared after :func:`header_key` (lower case,
#: no accents, letters and digits only).
HEADER_ALIASES: dict[str, tuple[str, ...]] = {
    "student_number": (
        "netudiant",
        "noetudiant",
        "numetudiant",
        "numeroetudiant",
        "numerodetudiant",
        "ndetudiant",
        "codeetudiant",
        "studentid",
        "studentnumber",
        "studentno",
        "studentnum",
        "etudiantid",
    ),
    "last_name": ("nom", "nomdefamille", "nomusuel", "lastname", "surname", "familyname"),
    "first_name": ("prenom", "firstname", "givenname", "forename"),
    "email": (
        "courriel",
        "email",
        "mail",
        "adressemail",
        "adresseemail",
        "emailaddress",
        "adressecourriel",
        "courrielinstitutionnel",
        "mel",
    ),
    "group": ("groupe", "group", "groupetd", "groupetp", "tdgroup", "tpgroup", "grp"),
}
FIELD_LABELS = {
    "student_number": "student number (N° étudiant)",
    "last_name": "last name (Nom)",
    "first_name": "first name (Prénom)",
    "email": "e-mail (Courriel)",
    "group": "group (Groupe)",
}
_HEADER_LOOKUP = {alias: field for field, aliases in HEADER_ALIASES.items() for alias in aliases}
REQUIRED_FIELDS = ("student_number", "last_name", "first_name")
#: Longest value per field, as in :mod:`coursehub.catalog.models`.
MAX_LENGTHS = {"student_number": 32, "last_name": 200, "first_name": 200, "email": 320, "group": 32}
DELIMITERS = (";", ",", "\t")


def _username_from_student_id(row: dict[str, str]) -> str:
    return row["student_number"]


def _username_from_email_local(row: dict[str, str]) -> str:
    return row["email"].partition("@")[0]


#: ``--username-from`` choices: how a row's hub username is made (then lower
#: case and stripped, as the hub normalises usernames).
USERNAME_RULES: dict[str, Callable[[dict[str, str]], str]] = {
    "student_id": _username_from_student_id,
    "email-local": _username_from_email_local,
}


@dataclass(frozen=True)
class RosterRow:
    """One student of a roster file; ``row`` is its spreadsheet row number (header = 1)."""

    row: int
    username: str
    student_number: str
    last_name: str
    first_name: str
    email: str | None = None
    group: str | None = None


def header_key(text: str) -> str:
    """Return a header without accents, case, spaces or punctuation.

    ``header_key("N° Étudiant") == "netudiant"``
    """
    decomposed = unicodedata.normalize("NFKD", text)
    ascii_text = "".join(c for c in decomposed if not unicodedata.combining(c))
    return re.sub(r"[^a-z0-9]", "", ascii_text.lower())


def column_letter(index: int) -> str:
    """Return the spreadsheet letter of a 0-based column index: 0 -> A, 25 -> Z, 26 -> AA."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def decode_roster(data: bytes) -> str:
    """Return the text of a roster file: UTF-8 (BOM or not), else Windows-1252, else Latin-1.

    A file starting with a UTF-16 byte-order mark (Excel's "Unicode text"
    export) is read as UTF-16.

    Raises
    ------
    RosterError
        If the file is empty or binary (NUL bytes; a zip such as an .xlsx).
    """
    if not data.strip():
        raise RosterError(["the file is empty"])
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # Excel's "Unicode text"
        return data.decode("utf-16")
    if data.startswith(b"PK\x03\x04") or b"\x00" in data[:4096]:
        raise RosterError(
            ["the file is not a CSV text file (binary data; an Excel file? save it as CSV)"]
        )
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def match_headers(header: list[str]) -> tuple[dict[str, int], list[str]]:
    """Map each known field to its column index; return it with the problems found."""
    columns: dict[str, int] = {}
    problems: list[str] = []
    for index, title in enumerate(header):
        field = _HEADER_LOOKUP.get(header_key(title))
        if field is None:
            continue
        if field in columns:
            first = columns[field]
            problems.append(
                f"header row: columns {column_letter(first)} ({header[first].strip()}) "
                f"and {column_letter(index)} ({title.strip()}) both give the "
                f"{FIELD_LABELS[field]}"
            )
            continue
        columns[field] = index
    return columns, problems


def _split(text: str) -> list[list[str]]:
    content = (line for line in text.splitlines() if any(c.isalnum() for c in line))
    header_line = next(content, "")

    def score(delimiter: str) -> tuple[int, int]:
        known = match_headers(_first_row(header_line, delimiter))[0]
        return len(known), header_line.count(delimiter)

    best = max(DELIMITERS, key=score)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=best)
    lines = io.StringIO(text, newline="").readlines()
    width = len(_first_row(header_line, best))
    records: list[list[str]] = []
    try:
        start = 0  # physical lines before the current record
        for record in reader:
            records.append(record)
            spans = any("\n" in value or "\r" in value for value in record)
            if spans or reader.line_num >= len(lines):  # a quoted line break, or the last row
                _check_quotes(record, len(records), lines[start : reader.line_num], best, width)
            start = reader.line_num
    except csv.Error as exc:
        raise RosterError([f"line {reader.line_num}: the file is not valid CSV ({exc})"]) from None
    return records


def _check_quotes(record: list[str], number: int, lines: list[str], sep: str, width: int) -> None:
    """Raise RosterError if record ``number`` (over ``lines``) opens a quote that never closes.

    Such a record runs to the end of the file (strict parsing of its lines
    finds no closing quote) or, closed by a later stray quote, has a value
    spanning lines and fewer values than the header (``width``).
    """
    try:
        list(csv.reader(io.StringIO("".join(lines), newline=""), delimiter=sep, strict=True))
        unclosed = False
    except csv.Error as exc:
        unclosed = "unexpected end of data" in str(exc)
    spans = [i for i, value in enumerate(record) if "\n" in value or "\r" in value]
    if unclosed or (spans and len(record) < width):
        column = column_letter(spans[0] if spans else len(record) - 1)
        raise RosterError(
            [f"row {number}, column {column}: unterminated quote (a '\"' opens a value "
             "that is not closed on its row)"]
        )  # fmt: skip


def _first_row(line: str, delimiter: str) -> list[str]:
    return next(csv.reader([line], delimiter=delimiter), [])


def parse_roster(data: bytes, username_rule: str = "student_id") -> list[RosterRow]:
    """Read a roster file into rows, one per student, in file order.

    Parameters
    ----------
    data
        The file's bytes, as uploaded or read from disk.
    username_rule
        A key of :data:`USERNAME_RULES`: ``"student_id"`` (the hub username
        is the student number) or ``"email-local"`` (the part of the e-mail
        before ``@``). The result is lower case and stripped.

    Returns
    -------
    list of RosterRow
        Blank lines are skipped; row numbers count them, as a spreadsheet does.

    Raises
    ------
    RosterError
        With every problem found: empty or binary file, missing column (named,
        with the headers found), and per row and column: empty required value,
        bad e-mail, bad username, a student listed twice (both rows named).
    """
    if username_rule not in USERNAME_RULES:
        raise ValidationError(
            f"username rule {username_rule!r} is not one of {', '.join(USERNAME_RULES)}"
        )
    records = _split(decode_roster(data))
    blank = [not any(cell.strip() for cell in record) for record in records]
    if all(blank):
        raise RosterError(["the file is empty"])
    start = blank.index(False)
    header = records[start]
    columns, problems = match_headers(header)
    required = REQUIRED_FIELDS + (("email",) if username_rule == "email-local" else ())
    missing = [FIELD_LABELS[field] for field in required if field not in columns]
    if missing:
        found = ", ".join(repr(h.strip()) for h in header if h.strip()) or "none"
        noun = "column" if len(missing) == 1 else "columns"
        raise RosterError([f"missing {noun} {', '.join(missing)}; headers found: {found}"])
    if problems:
        raise RosterError(problems)
    rule = USERNAME_RULES[username_rule]
    return _parse_records(records[start + 1 :], start + 2, header, columns, rule)


def _parse_records(
    records: list[list[str]],
    first_number: int,
    header: list[str],
    columns: dict[str, int],
    rule: Callable[[dict[str, str]], str],
) -> list[RosterRow]:
    rows: list[RosterRow] = []
    problems: list[str] = []
    seen: dict[str, int] = {}  # "number:<student number>" or "user:<username>" -> row
    for number, record in enumerate(records, start=first_number):
        if not any(cell.strip() for cell in record):
            continue
        row, row_problems = _parse_record(number, record, header, columns, rule)
        problems += row_problems
        student = _cell(record, columns["student_number"]).lower()
        keys = [f"number:{student}"] if student else []
        if row is not None:
            keys.append(f"user:{row.username}")
        first = next((seen[key] for key in keys if key in seen), None)
        if first is not None:
            who = student or (row.username if row else "")
            problems.append(
                f"row {number}: student {who} is listed twice (rows {first} and {number})"
            )
            continue
        seen.update(dict.fromkeys(keys, number))
        if row is not None:
            rows.append(row)
    if problems:
        raise RosterError(problems)
    if not rows:
        raise RosterError(["the file has a header but no student row"])
    return rows


def _parse_record(
    number: int,
    record: list[str],
    header: list[str],
    columns: dict[str, int],
    rule: Callable[[dict[str, str]], str],
) -> tuple[RosterRow | None, list[str]]:
    values = {field: _cell(record, index) for field, index in columns.items()}
    problems: list[str] = []

    def where(field: str) -> str:
        index = columns[field]
        return f"row {number}, column {column_letter(index)} ({header[index].strip()})"

    for field in (*REQUIRED_FIELDS, *(("email",) if rule is _username_from_email_local else ())):
        if not values[field]:
            problems.append(f"{where(field)}: the {FIELD_LABELS[field]} is empty")
    for field, value in values.items():
        if len(value) > MAX_LENGTHS[field]:
            problems.append(f"{where(field)}: longer than {MAX_LENGTHS[field]} characters")
    if values.get("email"):
        try:
            values["email"] = check_email(values["email"])
        except ValidationError as exc:
            problems.append(f"{where('email')}: {exc}")
    if problems:
        return None, problems
    source = "student_number" if rule is _username_from_student_id else "email"
    try:
        username = check_username(rule(values))
    except ValidationError as exc:
        return None, [f"{where(source)}: {exc}"]
    return RosterRow(
        row=number,
        username=username,
        student_number=values["student_number"],
        last_name=values["last_name"],
        first_name=values["first_name"],
        email=values.get("email") or None,
        group=values.get("group") or None,
    ), []


def _cell(record: list[str], index: int) -> str:
    value = record[index] if index < len(record) else ""
    return unicodedata.normalize("NFC", value.strip())
