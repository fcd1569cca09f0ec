"""parse_roster: the formats university systems export; every bad input named by row and column."""

from __future__ import annotations

import pytest

from coursehub.catalog.errors import RosterError, ValidationError
from coursehub.catalog.roster import RosterRow, column_letter, header_key, parse_roster

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
    rows = [["Nom", "Prénom", "N° étudiant"], ['Dupont; "le grand"', "Jean,\nPierre", "42"]]
    data = to_csv(rows, sep=";", quote_all=True).encode()
    (row,) = parse_roster(data)
    assert (row.last_name, row.first_name, row.username) == (
        'Dupont; "le grand"',
        "Jean,\nPierre",
        "42",
    )


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
