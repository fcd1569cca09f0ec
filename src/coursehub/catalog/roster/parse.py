"""Read a roster CSV as university systems export it: :func:`parse_roster` (pure).

Accepted: comma, semicolon or tab separated (chosen from the header line,
or named by the ``sep=;`` first line Excel writes; that line is not counted
as a row, Excel does not show it); UTF-8 with or without BOM, else
Windows-1252 (as browsers read it: its five undefined bytes are C1 controls,
refused by row and column), or UTF-16 with a BOM; quoted fields;
CRLF or LF; blank lines. Headers in French or English, in any order, compared
without case, accents, spaces or punctuation ("N° étudiant" = "numero
etudiant" = "student_id"); other columns are ignored. Names keep their accents
(normalised to Unicode NFC).

Rows are numbered as in a spreadsheet (the header is row 1, unless blank
lines come before it) and columns by
letter (A, B, ...). Every problem found is reported at once in a
:class:`~coursehub.catalog.errors.RosterError`.

Refused: binary files (an .xlsx, a PDF, bytes that decode to control
characters) with one short line, and any control character
(:mod:`coursehub.catalog.text`) anywhere in the file, named by row and
column. Tab, CR and LF are separators; inside a quoted value they are
accepted only in the columns that are not stored (a comment over several
lines), never in a name, number, e-mail or group. Messages quote at most
:data:`~coursehub.catalog.text.QUOTE_MAX` characters of a header and never
a student's value that holds a control character.

Decoding the bytes: :mod:`coursehub.catalog.roster.decode`. Planning and applying the
import: :mod:`coursehub.catalog.roster.plan` and :mod:`coursehub.catalog.roster.apply`.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from coursehub.catalog.errors import RosterError, ValidationError
from coursehub.catalog.people import check_email, check_username
from coursehub.catalog.roster.decode import UNSTORED_ALLOWED, decode_roster
from coursehub.catalog.text import control_char_problem, quote_text

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
#: Longest value per field, as in :mod:`coursehub.catalog.models.courses`.
MAX_LENGTHS = {"student_number": 32, "last_name": 200, "first_name": 200, "email": 320, "group": 32}
DELIMITERS = (";", ",", "\t")
#: Excel's first line naming the separator ("sep=;"), possibly quoted or padded
#: with separators by a later save ("sep=;;;").
SEP_LINE = re.compile(r'[ ]*"?sep=([;,\t])"?[;,\t ]*', re.IGNORECASE)


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


def split_sep_line(text: str) -> tuple[str, str | None]:
    """Return ``text`` without Excel's ``sep=;`` first line, and the separator it names.

    ``split_sep_line("sep=;\\nNom;Prénom\\n") == ("Nom;Prénom\\n", ";")``; a text
    without that line comes back whole, with None.
    """
    first, _newline, rest = text.lstrip("\ufeff").partition("\n")
    match = SEP_LINE.fullmatch(first.rstrip("\r"))
    if match is None:
        return text, None
    return rest, match[1]


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
                f"header row: columns {column_letter(first)} ({_label(header[first])}) "
                f"and {column_letter(index)} ({_label(title)}) both give the "
                f"{FIELD_LABELS[field]}"
            )
            continue
        columns[field] = index
    return columns, problems


def _label(title: str) -> str:
    """A header as messages quote it: stripped, controls escaped, at most 40 characters."""
    return quote_text(title.strip(), 40)


def _split(text: str) -> list[list[str]]:
    text, forced = split_sep_line(text)
    content = (line for line in text.splitlines() if any(c.isalnum() for c in line))
    header_line = next(content, "")

    def score(delimiter: str) -> tuple[int, int]:
        known = match_headers(_first_row(header_line, delimiter))[0]
        return len(known), header_line.count(delimiter)

    best = forced or max(DELIMITERS, key=score)
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
            [
                f"row {number}, column {column}: unterminated quote (a '\"' opens a value "
                "that is not closed on its row)"
            ]
        )


def _first_row(line: str, delimiter: str) -> list[str]:
    """The values of one line, or none when it is no CSV (a value over the csv module's
    field size limit: reading the whole file then names the line)."""
    try:
        return next(csv.reader([line], delimiter=delimiter), [])
    except csv.Error:
        return []


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
    controls = _control_problems(records, header, columns)
    if controls:
        raise RosterError(controls)
    if missing:
        found = quote_text(", ".join(repr(h.strip()) for h in header if h.strip())) or "none"
        noun = "column" if len(missing) == 1 else "columns"
        raise RosterError([f"missing {noun} {', '.join(missing)}; headers found: {found}"])
    if problems:
        raise RosterError(problems)
    rule = USERNAME_RULES[username_rule]
    return _parse_records(records[start + 1 :], start + 2, header, columns, rule)


def _control_problems(
    records: list[list[str]], header: list[str], columns: dict[str, int]
) -> list[str]:
    """Return "row R, column C (header): contains a control character (U+0000)" for each
    cell with one; tab, CR and LF pass in the columns that are not stored."""
    stored = set(columns.values())
    problems = []
    for number, record in enumerate(records, start=1):
        for index, value in enumerate(record):
            allowed = "" if index in stored else UNSTORED_ALLOWED
            problem = control_char_problem(value, allowed)
            if problem:
                title = _label(header[index]) if index < len(header) else ""
                name = f" ({title})" if title else ""
                problems.append(f"row {number}, column {column_letter(index)}{name}: {problem}")
    return problems


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
        return f"row {number}, column {column_letter(index)} ({_label(header[index])})"

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
