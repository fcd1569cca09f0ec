"""parse_roster: the formats university systems export; every bad input named by row and column."""

from __future__ import annotations

import pytest

from coursehub.catalog.errors import RosterError, ValidationError
from coursehub.catalog.roster.parse import RosterRow, column_letter, header_key, parse_roster

FRENCH = [
    ["N° étudiant", "Nom", "Prénom", "Courriel", "Groupe"],
    ["P2500001", "Lefèvre", "Anaïs", "anais.lefevre@etu.example.fr", "G1"],
    ["p2500002", "Ølsen", "Björn", "bjorn.olsen@etu.example.fr", "G2"],
    ["2500003", "N'Diaye", "Chloé", "", ""],
]
EXPECTED = [
    RosterRow(2, "p2500001", "P2500001", "Lefèvre", "Anaïs", "anais.lefevre@etu.example.fr", "G1"),
    RosterRow(3, "p2500002", "p2500002", "Ølsen", "Björn", "bjorn.olsen@etu.example.fr", "G2"),
    RosterRow(4, "2500003", "2500003", "N'Diaye", "Chloé", None, None),
]


def to_csv(rows, sep=";", newline="\r\n", quote_all=False):
    def cell(value):
        if quote_all or sep in value or '"' in value:
            return '"' + value.replace('"', '""') + '"'
        return value

    return "".join(sep.join(cell(v) for v in row) + newline for row in rows)


def roster_error(data, **kwargs):
    with pytest.raises(RosterError) as info:
        parse_roster(data, **kwargs)
    return info.value.problems


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "cp1252", "latin-1"])
@pytest.mark.parametrize("sep", [";", ",", "\t"])
@pytest.mark.parametrize("newline", ["\r\n", "\n"])
def test_encodings_separators_and_line_ends(encoding, sep, newline):
    data = to_csv(FRENCH, sep, newline).encode(encoding)
    assert parse_roster(data) == EXPECTED


def test_excel_unicode_text_utf16_tabs():
    assert parse_roster(to_csv(FRENCH, sep="\t").encode("utf-16")) == EXPECTED


def test_utf8_with_bom_keeps_every_field():
    assert parse_roster(to_csv(FRENCH).encode("utf-8-sig")) == EXPECTED


def test_cp1252_specific_characters():
    rows = [["Numéro étudiant", "Nom", "Prénom"], ["1", "Œuvre", "Zoë “Zo”"]]
    parsed = parse_roster(to_csv(rows).encode("cp1252"))
    assert (parsed[0].last_name, parsed[0].first_name) == ("Œuvre", "Zoë “Zo”")


@pytest.mark.parametrize(
    "header",
    [
        ["Student number", "Last name", "First name", "Email", "Group"],
        ["student_id", "last_name", "first_name", "email", "group"],
        ["  NUMERO ETUDIANT ", "NOM", "PRENOM", "E-mail", "GROUPE TD"],
        ["n° Étudiant", "nom de famille", "prénom", "Courriel", "groupe"],
    ],
)
def test_header_spellings(header):
    parsed = parse_roster(to_csv([header, *FRENCH[1:]], sep=",").encode())
    assert parsed == EXPECTED


def test_columns_in_any_order_and_extra_columns_ignored():
    order = [4, 3, 1, 0, 2]
    rows = [[r[i] for i in order] + ["extra"] for r in FRENCH]
    rows[0][-1] = "Date de naissance"
    assert parse_roster(to_csv(rows).encode()) == EXPECTED


def test_quoted_fields_with_separators_quotes_and_newlines():
    rows = [
        ["Nom", "Prénom", "N° étudiant", "Remarque"],
        ['Dupont; "le grand"', "Jean, Pierre", "42", "tiers temps\r\nsalle 3"],
    ]
    data = to_csv(rows, sep=";", quote_all=True).encode()
    (row,) = parse_roster(data)
    assert (row.last_name, row.first_name, row.username) == (
        'Dupont; "le grand"',
        "Jean, Pierre",
        "42",
    )


def test_a_line_break_inside_a_stored_value_is_refused_with_its_row_and_column():
    rows = [["Nom", "Prénom", "N° étudiant"], ["Dupont", "Jean\nPierre", "42"]]
    assert roster_error(to_csv(rows, quote_all=True).encode()) == [
        "row 2, column B (Prénom): contains a control character (U+000A)"
    ]


def test_blank_lines_are_skipped_but_counted():
    data = (
        "\r\n" + to_csv(FRENCH[:2]) + "\r\n;;;;\r\n" + to_csv(FRENCH[2:3]) + "\r\n\r\n"
    ).encode()
    assert [r.row for r in parse_roster(data)] == [3, 6]


def test_username_from_email_local_part():
    parsed = parse_roster(to_csv(FRENCH[:3]).encode(), username_rule="email-local")
    assert [r.username for r in parsed] == ["anais.lefevre", "bjorn.olsen"]


def test_username_from_email_needs_the_email():
    problems = roster_error(to_csv(FRENCH).encode(), username_rule="email-local")
    assert problems == ["row 4, column D (Courriel): the e-mail (Courriel) is empty"]
    problems = roster_error(to_csv([r[:3] for r in FRENCH]).encode(), username_rule="email-local")
    assert problems[0].startswith("missing column e-mail (Courriel)")


def test_unknown_username_rule():
    with pytest.raises(ValidationError, match="student_id, email-local"):
        parse_roster(to_csv(FRENCH).encode(), username_rule="login")


def test_empty_file():
    for data in (b"", b"  \r\n\r\n", "\ufeff".encode("utf-8")):
        assert roster_error(data) == ["the file is empty"]


def test_header_only():
    assert roster_error(to_csv(FRENCH[:1]).encode()) == ["the file has a header but no student row"]


@pytest.mark.parametrize("data", [b"PK\x03\x04\x14\x00\x06\x00rest", b"\x00\x01\x02binary\xff\xfe"])
def test_binary_file(data):
    assert "not a CSV text file" in roster_error(data)[0]


def test_missing_column_names_it_and_lists_the_headers():
    rows = [["Nom", "Prénom", "Courriel"], ["A", "B", "a@b.fr"]]
    assert roster_error(to_csv(rows).encode()) == [
        "missing column student number (N° étudiant); headers found: 'Nom', 'Prénom', 'Courriel'"
    ]


def test_two_columns_for_one_field():
    rows = [["Nom", "N° étudiant", "Prénom", "Last name"], ["A", "1", "B", "C"]]
    assert roster_error(to_csv(rows).encode()) == [
        "header row: columns A (Nom) and D (Last name) both give the last name (Nom)"
    ]


def test_every_row_error_is_reported_with_row_and_column():
    rows = [
        *FRENCH[:2],
        ["", "Sans", "Numéro", "", ""],
        ["2500004", "", "Sans nom", "x@y.fr", ""],
        ["2500005", "Bad", "Mail", "not-an-email", "G1"],
        ["25 00 06", "Bad", "Login", "", ""],
    ]
    problems = roster_error(to_csv(rows).encode())
    assert problems == [
        "row 3, column A (N° étudiant): the student number (N° étudiant) is empty",
        "row 4, column B (Nom): the last name (Nom) is empty",
        "row 5, column D (Courriel): 'not-an-email' is not an e-mail address",
        "row 6, column A (N° étudiant): username '25 00 06' must be 1-128 characters among "
        "a-z 0-9 . _ @ + -, starting with a letter or digit",
    ]


def test_student_listed_twice_names_both_rows():
    rows = [*FRENCH, ["P2500001", "Lefèvre", "Anaïs", "", ""], FRENCH[2]]
    assert roster_error(to_csv(rows).encode()) == [
        "row 5: student p2500001 is listed twice (rows 2 and 5)",
        "row 6: student p2500002 is listed twice (rows 3 and 6)",
    ]


def test_too_long_value():
    rows = [FRENCH[0], ["1", "x" * 201, "B", "", ""]]
    assert roster_error(to_csv(rows).encode()) == [
        "row 2, column B (Nom): longer than 200 characters"
    ]


def test_error_message_lists_problems():
    rows = [FRENCH[0], *[["", "A", "B", "", ""] for _ in range(25)]]
    with pytest.raises(RosterError, match=r"^roster: row 2, column A .*; and 5 more$") as info:
        parse_roster(to_csv(rows).encode())
    assert len(info.value.problems) == 25


def test_header_key_and_column_letters():
    assert header_key(" N° d'Étudiant ") == "ndetudiant"
    assert [column_letter(i) for i in (0, 25, 26, 27, 701, 702)] == [
        "A",
        "Z",
        "AA",
        "AB",
        "ZZ",
        "AAA",
    ]


def test_several_missing_columns_in_one_message_with_the_headers_once():
    rows = [["foo", "bar"], ["1", "2"]]
    assert roster_error(to_csv(rows).encode()) == [
        "missing columns student number (N° étudiant), last name (Nom), first name (Prénom); "
        "headers found: 'foo', 'bar'"
    ]


@pytest.mark.parametrize(
    "text, where",
    [
        ('N° étudiant;Nom;Prénom\r\n1;"Dupont;Jean\r\n2;Martin;Paul\r\n', "row 2, column B"),
        ('N° étudiant;Nom;Prénom\r\n1;Dupont;Jean\r\n2;Martin;"Paul\r\n', "row 3, column C"),
        ('N° étudiant;Nom;Prénom\n1;Dupont;Jean\n2;Martin;"Paul', "row 3, column C"),
    ],
)
def test_unterminated_quote_is_named_with_its_row_and_column(text, where):
    assert roster_error(text.encode()) == [
        f"{where}: unterminated quote (a '\"' opens a value that is not closed on its row)"
    ]


# control characters, binary files, Excel's "sep=" line ------------------------------------------


@pytest.mark.parametrize(
    ("char", "code"),
    [
        ("\x00", "U+0000"),
        ("\x01", "U+0001"),
        ("\x1b", "U+001B"),
        ("\x7f", "U+007F"),
        ("\x85", "U+0085"),
        ("\x9b", "U+009B"),
        ("\u2028", "U+2028"),
        ("\u2029", "U+2029"),
        ("\u202e", "U+202E"),
        ("\u2066", "U+2066"),
        ("\t", "U+0009"),
        ("\r", "U+000D"),
    ],
)
@pytest.mark.parametrize(("column", "where"), [(1, "column B (Nom)"), (4, "column E (Groupe)")])
def test_a_control_character_in_a_stored_value_is_named_by_row_and_column(
    char, code, column, where
):
    rows = [list(r) for r in FRENCH]
    rows[2][column] = f"x{char}y"
    problems = roster_error(to_csv(rows, quote_all=True).encode("utf-8"))
    assert problems == [f"row 3, {where}: contains a control character ({code})"]


def test_control_characters_in_a_column_that_is_not_stored_are_refused_too():
    rows = [[*r, "Remarque"] if i == 0 else [*r, "ok"] for i, r in enumerate(FRENCH)]
    rows[3][5] = "voir\x00secrétariat"
    assert roster_error(to_csv(rows).encode()) == [
        "row 4, column F (Remarque): contains a control character (U+0000)"
    ]


def test_a_control_character_in_the_header_is_named_without_echoing_it():
    rows = [["N° étudiant", "Nom", "Prénom", "Co\x07mmentaire"], ["1", "A", "B", ""]]
    assert roster_error(to_csv(rows).encode()) == [
        "row 1, column D (Co\\u0007mmentaire): contains a control character (U+0007)"
    ]


def test_a_nul_byte_after_the_first_4_kib_is_named_by_row_and_column_without_the_value():
    lines = [f"p26{i:05d};Nom{i};Prénom;p26{i:05d}@example.org;" for i in range(200)]
    text = "N° étudiant;Nom;Prénom;Courriel;Groupe\r\n" + "\r\n".join(lines)
    data = (text + "\r\np2699999;Mar\x00tin;Léa;lea@example.org;\r\n").encode()
    assert len(data) > 4096
    problems = roster_error(data)
    assert problems == ["row 202, column B (Nom): contains a control character (U+0000)"]
    assert "Mar" not in problems[0] and "lea@" not in problems[0]


@pytest.mark.parametrize(
    "data",
    [
        bytes(range(0x80, 0x100)) * 12,  # high bytes that are no text in any encoding tried
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100,  # an old .xls
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n",
        b"\x1f\x8b\x08\x00rest",
        b"\xff\xfeN\x00o\x00m",  # UTF-16 cut in the middle of a character
        "Nom;Prénom\r\n".encode() + bytes(range(0x01, 0x09)) * 40,
    ],
    ids=["high-bytes", "xls", "pdf", "gzip", "broken-utf16", "control-bytes"],
)
def test_a_binary_file_gets_one_short_line(data):
    problems = roster_error(data)
    assert problems == [
        "the file is not a CSV text file (binary data; an Excel file? save it as CSV)"
    ]


def test_a_long_unknown_header_is_quoted_cut_to_about_100_characters():
    header = "Année d'inscription à l'université, " * 60  # one long cell
    problems = roster_error((header + "\r\n1\r\n").encode("cp1252"))
    assert len(problems) == 1 and len(problems[0]) < 250
    assert problems[0].startswith("missing columns") and problems[0].endswith("...")


def test_bytes_that_are_neither_utf8_nor_mostly_ascii_are_binary_not_a_header():
    header = "".join(chr(c) for c in range(0xC0, 0x100)) * 60  # what a binary file decodes to
    assert roster_error((header + "\r\n1\r\n").encode("cp1252")) == [
        "the file is not a CSV text file (binary data; an Excel file? save it as CSV)"
    ]


def test_windows_1252_text_is_read_as_written_and_a_stray_undefined_byte_is_named():
    """Python's cp1252 refuses 0x81 0x8D 0x8F 0x90 0x9D; Windows and browsers read them as
    C1 controls. Falling back to Latin-1 for the whole file turned every "€" into U+0080."""
    head = "N° étudiant;Nom;Prénom\r\n".encode("cp1252")
    good = "p1;Müller€;Zoë “Zo”\r\n".encode("cp1252")
    (row,) = parse_roster(head + good)
    assert (row.last_name, row.first_name) == ("Müller€", "Zoë “Zo”")
    for byte in (0x81, 0x8D, 0x8F, 0x90, 0x9D):
        stray = b"p2;Du" + bytes([byte]) + b"pont;Paul\r\n"
        assert roster_error(head + good + stray) == [
            f"row 3, column B (Nom): contains a control character (U+{byte:04X})"
        ]


@pytest.mark.parametrize(
    ("first_line", "sep", "encoding"),
    [
        ("sep=;", ";", "utf-8"),
        ("sep=,", ",", "utf-8"),
        ("sep=\t", "\t", "utf-8"),
        ("sep=;", ";", "utf-8-sig"),
        ('"sep=;"', ";", "utf-8"),
        ("SEP=;;;;", ";", "cp1252"),
        ("sep=\t", "\t", "utf-16"),
    ],
)
def test_excels_sep_line_names_the_separator_and_is_not_a_row(first_line, sep, encoding):
    data = (first_line + "\r\n" + to_csv(FRENCH, sep=sep)).encode(encoding)
    assert parse_roster(data) == EXPECTED


def test_a_sep_line_wins_over_the_guess():
    rows = [["N° étudiant", "Nom", "Prénom"], ["1", "Dupont, Jean", "Paul"]]
    (row,) = parse_roster(("sep=;\n" + to_csv(rows, sep=";")).encode())
    assert row.last_name == "Dupont, Jean"


@pytest.mark.parametrize(
    "first_line",
    [
        b"a" * 200_000,  # one huge line, no separator, no line end
        b'N\xc2\xb0 \xc3\xa9tudiant;Nom;"' + b"a" * 200_000 + b'"',  # a huge quoted header cell
        b"sep=;\n" + b"x;" * 100_000,
    ],
    ids=["no-separator", "quoted-header", "after-sep-line"],
)
def test_a_header_line_over_the_csv_field_limit_is_a_roster_error_not_a_crash(first_line):
    problems = roster_error(first_line + b"\r\n1;Dupont;Paul\r\n")
    assert len(problems) == 1 and len(problems[0]) < 250
