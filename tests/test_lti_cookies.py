"""The LTI launch's state cookies come back from the platform's cross-site POST, or it says why.

jupyterhub/ltiauthenticator#157: a platform (Moodle) sends the launch with a
cross-site auto-submitted form; a cookie without ``SameSite=None`` is not
sent with it, and ``SameSite=None`` needs ``Secure``.
"""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from coursehub.spawn.lti import (
    CoursehubLoginInitHandler,
    is_https,
    missing_state_message,
    plan_state_cookie,
)


def test_over_https_the_state_cookie_is_samesite_none_and_secure():
    assert plan_state_cookie(True) == {
        "expires_days": 1,
        "httponly": True,
        "encrypted": True,
        "samesite": "None",
        "secure": True,
    }
    assert "samesite" not in plan_state_cookie(False)  # a browser refuses None without Secure


@pytest.mark.parametrize(
    ("public_url", "protocol", "https"),
    [
        ("https://hub.example.org/", "http", True),  # TLS ends at a proxy in front of the hub
        ("http://hub.example.org/", "https", False),
        (None, "https", True),
        (None, "http", False),
    ],
)
def test_https_is_the_public_urls_scheme_else_the_requests(public_url, protocol, https):
    handler = SimpleNamespace(
        settings={"public_url": urlsplit(public_url) if public_url else None},
        request=SimpleNamespace(protocol=protocol),
    )
    assert is_https(handler) is https


def test_the_login_initiation_sets_its_cookies_with_those_options():
    seen = []
    handler = SimpleNamespace(
        settings={"public_url": urlsplit("https://hub.example.org/")},
        request=SimpleNamespace(protocol="http"),
        _set_cookie=lambda key, value, **options: seen.append((key, options)),
    )
    CoursehubLoginInitHandler._set_oauth_cookie(handler, "lti13authenticator-state", "s")  # type: ignore[arg-type]
    assert seen == [("lti13authenticator-state", plan_state_cookie(True))]


def test_a_missing_state_cookie_says_what_to_do():
    assert "serve the hub over HTTPS" in missing_state_message(False)
    assert "allow them for this hub" in missing_state_message(True)
