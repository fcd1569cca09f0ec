"""`coursehub hub config --lti FILE`: platform registrations read, checked and rendered."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.hub.ltiplatforms import parse_registrations, plan_https_warning
from coursehub.hub.render import HubSettings, render_hub_config
from coursehub.spawn.ltiregistration import Platform, find_platform, parse_platform
from helpers import assert_matches_golden

MOODLE = """
[[platform]]
issuer = "https://moodle.univ.example.fr"
client_ids = ["Xy12AbC"]
deployment_ids = ["3", "4"]
authorize_url = "https://moodle.univ.example.fr/mod/lti/auth.php"
jwks_url = "https://moodle.univ.example.fr/mod/lti/certs.php"
username_claim = "custom_username"
student_number_claim = "custom_student_number"
"""
PLATFORM = {
    "issuer": "https://moodle.univ.example.fr",
    "client_ids": ["Xy12AbC"],
    "deployment_ids": ["3", "4"],
    "authorize_url": "https://moodle.univ.example.fr/mod/lti/auth.php",
    "jwks_url": "https://moodle.univ.example.fr/mod/lti/certs.php",
    "username_claim": "custom_username",
    "student_number_claim": "custom_student_number",
}


def test_a_moodle_registration_is_read_as_the_authenticator_takes_it():
    assert parse_registrations(MOODLE) == [PLATFORM]


def test_the_username_claim_defaults_to_the_email_local_part():
    text = MOODLE.replace('username_claim = "custom_username"\n', "")
    assert parse_registrations(text)[0]["username_claim"] == "email_local_part"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("[[platform]]", "[[platforms]]"), "unknown table(s) platforms"),
        (('client_ids = ["Xy12AbC"]\n', ""), "platform 1: missing client_ids"),
        (("jwks_url", "jwks"), "missing jwks_url; unknown jwks"),
        (('"https://moodle.univ.example.fr"', '"http://moodle.univ.example.fr"'), "issuer must"),
        (('deployment_ids = ["3", "4"]', "deployment_ids = []"), "deployment_ids must be"),
        (('"custom_username"', '"custom username"'), "username_claim must be"),
        (("[[platform]]", "[[platform"), "not TOML"),
    ],
)
def test_a_bad_registration_file_is_refused_with_what_is_wrong(change, message):
    with pytest.raises(UsageError) as caught:
        parse_registrations(MOODLE.replace(*change), "moodle.toml")
    assert message in str(caught.value)
    assert str(caught.value).startswith("moodle.toml")


def test_the_same_issuer_twice_is_refused():
    with pytest.raises(UsageError, match="registered twice"):
        parse_registrations(MOODLE + MOODLE)


def test_the_lti_hub_config_matches_its_golden_file():
    settings = replace(HubSettings(), kind="local", lti_platforms=(PLATFORM,))
    text = render_hub_config(settings)
    ast.parse(text)
    assert_matches_golden(text, "hub_config_lti.py.golden")


def test_the_config_without_lti_names_no_lti_authenticator():
    assert "CoursehubLTIAuthenticator" not in render_hub_config(HubSettings())


def test_lti_on_kubernetes_is_refused_with_where_to_look():
    settings = replace(HubSettings(), kind="kubernetes", lti_platforms=(PLATFORM,))
    with pytest.raises(UsageError, match=r"docs/lti\.md"):
        render_hub_config(settings)


def test_the_command_renders_the_registrations_and_refuses_a_missing_file(tmp_path, capsys):
    path = tmp_path / "moodle.toml"
    path.write_text(MOODLE, encoding="utf-8")
    assert main(["hub", "config", "--spawner", "systemd", "--lti", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        'c.JupyterHub.authenticator_class = "coursehub.spawn.lti.CoursehubLTIAuthenticator"' in out
    )
    assert "'deployment_ids': ['3', '4']," in out
    assert '"COURSEHUB_LTI_LAUNCH_TOKEN": LTI_LAUNCH_TOKEN,' in out
    assert main(["hub", "config", "--lti", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read the registrations" in capsys.readouterr().err


def test_the_hub_finds_the_registration_of_an_issuer_and_client():
    platforms = (parse_platform(PLATFORM), parse_platform({**PLATFORM, "issuer": "https://b"}))
    assert find_platform(platforms, "https://b") == platforms[1]
    assert find_platform(platforms, PLATFORM["issuer"], "Xy12AbC") == platforms[0]
    assert find_platform(platforms, PLATFORM["issuer"], "other-client") is None
    assert find_platform(platforms, "https://unknown") is None


def test_a_registration_missing_a_url_stops_the_hub_with_its_name():
    with pytest.raises(ValueError, match="missing jwks_url"):
        parse_platform({**PLATFORM, "jwks_url": ""})
    assert isinstance(parse_platform(PLATFORM), Platform)


@pytest.mark.parametrize(
    ("bind_url", "public_url", "warned"),
    [
        ("http://:8000", "", True),
        ("https://:443", "", False),
        ("http://127.0.0.1:8000", "https://hub.example.org/", False),  # TLS ends at a proxy
        ("https://:443", "http://hub.example.org/", True),
    ],
)
def test_lti_on_a_plain_http_public_address_is_reported(bind_url, public_url, warned):
    warning = plan_https_warning(bind_url, public_url)
    assert bool(warning) is warned
    if warned:
        assert "LMS launches need the hub served over HTTPS" in warning
        assert (public_url or bind_url) in warning


def test_the_command_warns_of_plain_http_and_renders_the_public_url(tmp_path, capsys):
    path = tmp_path / "moodle.toml"
    path.write_text(MOODLE, encoding="utf-8")
    assert main(["hub", "config", "--lti", str(path)]) == 0
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("coursehub: warning: --lti: LMS launches need the hub served over HTTPS")
    assert "http://:8000" in line
    assert "c.JupyterHub.public_url" not in captured.out
    public = ["--public-url", "https://hub.example.org/"]
    assert main(["hub", "config", "--lti", str(path), *public]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "c.JupyterHub.public_url = 'https://hub.example.org/'" in captured.out
    assert main(["hub", "config", "--public-url", "hub.example.org"]) == 2
    assert "--public-url must look like https://HOST/" in capsys.readouterr().err
