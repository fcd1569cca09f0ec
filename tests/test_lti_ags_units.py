"""Grade passback's pure parts from tables: the AGS claim, the plan, URLs, keys, registrations."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from types import SimpleNamespace

import jwt
import pytest

from coursehub.catalog.lti.ags import (
    AGS_CLAIM,
    SCOPE_LINEITEM,
    SCOPE_SCORE,
    GradeServiceClaim,
    launch_client_id,
    parse_grade_service,
)
from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.grading.export import (
    GRADED,
    NOT_SUBMITTED,
    SUBMITTED,
    GradeCell,
    GradeRow,
    GradeTable,
)
from coursehub.hub.ltiplatforms import parse_registrations
from coursehub.lti.ags import render_score, scores_url
from coursehub.lti.keys import (
    ToolKeyError,
    client_assertion,
    generate_key,
    load_private_key,
    public_jwk,
    thumbprint,
)
from coursehub.lti.passback import PassbackError, choose_service, plan_passback

LINEITEMS = "https://moodle.example.fr/mod/lti/services.php/2/lineitems?type_id=1"


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        (
            {"scope": [SCOPE_LINEITEM, SCOPE_SCORE], "lineitems": LINEITEMS},
            GradeServiceClaim((SCOPE_LINEITEM, SCOPE_SCORE), LINEITEMS),
        ),
        (
            {"scope": [SCOPE_SCORE], "lineitems": LINEITEMS, "lineitem": LINEITEMS + "&li=4"},
            GradeServiceClaim((SCOPE_SCORE,), LINEITEMS, LINEITEMS + "&li=4"),
        ),
        ({"scope": [SCOPE_SCORE], "lineitem": LINEITEMS}, None),  # no container
        ({"scope": [SCOPE_SCORE], "lineitems": "javascript:alert(1)"}, None),
        ("not an object", None),
    ],
    ids=["both-scopes", "with-lineitem", "no-lineitems", "not-http", "not-an-object"],
)
def test_the_ags_claim_is_read_only_when_it_names_a_line_items_url(claim, expected):
    assert parse_grade_service({AGS_CLAIM: claim}) == expected


def test_a_launch_without_the_ags_claim_has_no_grade_service():
    assert parse_grade_service({"sub": "x"}) is None


@pytest.mark.parametrize(
    ("claims", "client_id"),
    [
        ({"aud": "tool-1"}, "tool-1"),
        ({"aud": ["tool-1"]}, "tool-1"),
        ({"aud": ["tool-1", "other"], "azp": "tool-1"}, "tool-1"),
        ({"aud": ["tool-1", "other"]}, ""),
    ],
)
def test_the_tools_client_id_comes_from_the_audience_or_azp(claims, client_id):
    assert launch_client_id(claims) == client_id


def table() -> GradeTable:
    cells = {
        "alice": GradeCell(GRADED, 4.0),
        "bob": GradeCell(GRADED, 2.0, 1.0),
        "carol": GradeCell(SUBMITTED),
        "dan": GradeCell(NOT_SUBMITTED),
        "eve": GradeCell(GRADED, 3.0),
    }
    rows = tuple(
        GradeRow(sid, sid.title(), (GradeCell(GRADED, 1.0), c)) for sid, c in cells.items()
    )
    return GradeTable("c-2025", ("ps0", "ps1"), (1.0, 4.0), rows)


SUBJECTS = {"alice": "s-a", "bob": "s-b", "carol": "s-c", "dan": "s-d"}


@pytest.mark.parametrize(
    ("zero_missing", "expected"),
    [
        (
            False,
            [
                ("alice", "s-a", 4.0, ""),
                ("bob", "s-b", 2.0, ""),
                ("carol", "", None, "submitted, not graded yet"),
                ("dan", "", None, "not submitted"),
                ("eve", "", 3.0, "never launched the hub from the LMS"),
            ],
        ),
        (
            True,
            [
                ("alice", "s-a", 4.0, ""),
                ("bob", "s-b", 2.0, ""),
                ("carol", "", None, "submitted, not graded yet"),
                ("dan", "s-d", 0.0, ""),
                ("eve", "", 3.0, "never launched the hub from the LMS"),
            ],
        ),
    ],
    ids=["graded-only", "zero-missing"],
)
def test_the_plan_sends_graded_scores_and_names_every_skip(zero_missing, expected):
    plan = plan_passback(table(), "ps1", SUBJECTS, zero_missing)
    got = [(p.student_id, p.user_id, p.score, p.skip.split(" (")[0]) for p in plan]
    assert got == expected


def test_the_plan_refuses_an_assignment_outside_the_gradebook():
    with pytest.raises(
        PassbackError, match=r"'ps9' is not in the gradebook of c-2025 \(assignments: ps0, ps1\)"
    ):
        plan_passback(table(), "ps9", SUBJECTS)


@pytest.mark.parametrize(
    ("lineitem", "scores"),
    [
        ("https://lms/li/7", "https://lms/li/7/scores"),
        ("https://lms/li/7/", "https://lms/li/7/scores"),
        (
            "https://m.fr/mod/lti/services.php/2/lineitems/5/lineitem?type_id=1",
            "https://m.fr/mod/lti/services.php/2/lineitems/5/lineitem/scores?type_id=1",
        ),
    ],
)
def test_the_scores_url_appends_scores_to_the_line_items_path(lineitem, scores):
    assert scores_url(lineitem) == scores


def test_a_score_says_completed_and_fully_graded_with_an_iso_timestamp():
    body = render_score("s-a", 2.5, 4.0, datetime(2026, 1, 5, 10, 30, tzinfo=UTC))
    assert body == {
        "userId": "s-a",
        "scoreGiven": 2.5,
        "scoreMaximum": 4.0,
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": "2026-01-05T10:30:00.000+00:00",
    }


def service(
    code="K7QX-3MZP", token_url="https://lms/token", scopes=f"{SCOPE_LINEITEM} {SCOPE_SCORE}"
):
    link = SimpleNamespace(code=code, context_title="Méca", context_id="42", issuer="https://lms")
    return SimpleNamespace(link=link, token_url=token_url, scopes=scopes)


@pytest.mark.parametrize(
    ("services", "code", "message"),
    [
        ([], None, "no LMS link of c-2025 has grade services"),
        ([service(), service("ABCD-EFGH")], None, "several LMS links; choose one: K7QX-3MZP"),
        ([service()], "ZZZZ-ZZZZ", "no LMS link 'ZZZZ-ZZZZ' with grade services"),
        ([service(token_url="")], None, "platform https://lms has no token_url"),
        ([service(scopes=SCOPE_SCORE)], None, f"does not let the tool use {SCOPE_LINEITEM}"),
    ],
    ids=["none", "several", "unknown-code", "no-token-url", "missing-scope"],
)
def test_a_grade_service_that_cannot_be_used_is_named(services, code, message):
    with pytest.raises(PassbackError, match=message):
        choose_service(services, "c-2025", code)


def test_a_link_code_picks_its_grade_service_among_several():
    chosen = choose_service([service(), service("ABCD-EFGH")], "c-2025", "abcd-efgh")
    assert chosen.link.code == "ABCD-EFGH"


REGISTRATION = """
[[platform]]
issuer = "https://moodle.univ.example.fr"
client_ids = ["Xy12AbC"]
deployment_ids = ["3"]
authorize_url = "https://moodle.univ.example.fr/mod/lti/auth.php"
jwks_url = "https://moodle.univ.example.fr/mod/lti/certs.php"
"""


def test_a_registration_may_name_its_token_url():
    token = 'token_url = "https://moodle.univ.example.fr/mod/lti/token.php"\n'
    (platform,) = parse_registrations(REGISTRATION + token)
    assert platform["token_url"] == "https://moodle.univ.example.fr/mod/lti/token.php"
    (plain,) = parse_registrations(REGISTRATION)
    assert "token_url" not in plain


def test_a_token_url_over_plain_http_is_refused():
    with pytest.raises(UsageError, match="platform 1: token_url must be an https URL"):
        parse_registrations(REGISTRATION + 'token_url = "http://moodle.example.fr/token"\n')


def test_the_hub_forwards_the_token_url_with_the_claims():
    from coursehub.spawn.ltiregistration import launch_body, parse_platform

    platform = parse_platform({**parse_registrations(REGISTRATION)[0], "token_url": "https://t"})
    body = launch_body(platform, {"sub": "x"})
    assert body["token_url"] == "https://t" and body["claims"] == {"sub": "x"}


def test_the_hub_tells_the_course_app_its_admins_with_every_launch():
    from coursehub.spawn.ltiregistration import launch_body, parse_platform

    platform = parse_platform(parse_registrations(REGISTRATION)[0])
    assert launch_body(platform, {}, ("root", "hubadmin"))["hub_admins"] == ["hubadmin", "root"]


def test_the_key_id_is_the_rfc_7638_thumbprint():
    # RFC 7638, section 3.1: the example key and its thumbprint.
    n = (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJ"
        "ECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW"
        "2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQ"
        "Fh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
    )
    assert thumbprint(n, "AQAB") == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_keygen_writes_a_private_key_and_refuses_to_replace_it(tmp_path, capsys):
    path = tmp_path / "lti" / "tool-key.pem"
    assert main(["lti", "keygen", "--key", str(path)]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    first = path.read_bytes()
    assert main(["lti", "keygen", "--key", str(path)]) == 2
    assert "pass --force to replace it" in capsys.readouterr().err
    assert path.read_bytes() == first
    assert main(["lti", "keygen", "--key", str(path), "--force"]) == 0
    assert path.read_bytes() != first
    assert main(["lti", "jwks", "--key", str(path)]) == 0
    assert '"kty": "RSA"' in capsys.readouterr().out


def test_a_key_readable_by_others_or_missing_is_refused(tmp_path):
    path = generate_key(tmp_path / "key.pem")
    path.chmod(0o644)
    with pytest.raises(ToolKeyError, match="readable by other users"):
        load_private_key(path)
    with pytest.raises(ToolKeyError, match="run `coursehub lti keygen`"):
        load_private_key(tmp_path / "missing.pem")


def test_the_client_assertion_names_the_tool_to_the_token_url(tmp_path):
    key = load_private_key(generate_key(tmp_path / "key.pem"))
    token = client_assertion(key, "tool-1", "https://lms/token", now=1_800_000_000)
    claims = jwt.decode(
        token,
        key.public_key(),
        algorithms=["RS256"],
        audience="https://lms/token",
        options={"verify_exp": False, "verify_iat": False},
    )
    assert (claims["iss"], claims["sub"], claims["exp"] - claims["iat"]) == (
        "tool-1",
        "tool-1",
        300,
    )
    assert jwt.get_unverified_header(token)["kid"] == public_jwk(key)["kid"]
    again = client_assertion(key, "tool-1", "https://lms/token", now=1_800_000_000)
    assert jwt.decode(again, options={"verify_signature": False})["jti"] != claims["jti"]
