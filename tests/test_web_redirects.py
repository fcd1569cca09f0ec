"""After sign-in the app sends the user back only to one of its pages, whatever ``next`` says."""

from __future__ import annotations

import shutil
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from flask import Flask, jsonify, request

from coursehub.web.app import create_app
from coursehub.web.redirects import MAX_NEXT, plan_location, safe_next
from coursehub.web.testing import dispose_app, live_server

P = "/services/coursehub/"

GOOD = [
    P,
    f"{P}courses/mlmeca-2025/",
    f"{P}courses/mlmeca-2025/?page=2#students",
    f"{P}people/?q=Lef%C3%A8vre",
    f"{P}courses/mlmeca-2025/members?next=//evil.example",  # another next, in the query: harmless
]

BAD = [
    None,
    "",
    42,
    ["/services/coursehub/"],
    "/",
    "/\t/evil.example/",
    "/\n/evil.example/",
    "/\r/evil.example/",
    "/\x00/evil.example/",
    f"{P}\r\nSet-Cookie: session=x",
    "\t//evil.example/",
    " /services/coursehub/",
    f"{P}a b",
    "//evil.example",
    "///evil.example",
    "////evil.example",
    "/\\evil.example",
    "/\\\\evil.example",
    "\\\\evil.example",
    f"{P}\\..\\..\\evil",
    "/%2f%2fevil.example",
    "/%2F/evil.example",
    "/%5cevil.example",
    "/%09/evil.example",
    f"{P}%2f%2fevil.example",
    f"{P}%5c%5cevil.example",
    f"{P}%252f%252fevil.example",
    f"{P}%25252f%25252fevil.example",
    f"{P}%0a",
    f"{P}%00",
    f"{P}../../hub/admin",
    f"{P}%2e%2e/%2e%2e/hub/admin",
    f"{P}./x",
    "javascript:alert(document.cookie)",
    "JaVaScRiPt:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "http://evil.example/services/coursehub/",
    "https:evil.example",
    "http:/services/coursehub/",
    "http:\\\\evil.example",
    f"{P}\u2028",
    f"{P}\u202eevil",
    f"{P}%E2%80%AEevil",
    f"{P}\x85",
    f"{P}\x7f",
    "/\uff0f\uff0fevil.example",
    f"{P}\uff0f\uff0fevil.example",
    "/services/coursehub",
    "/services/coursehubX/",
    "/hub/admin",
    P + "a" * MAX_NEXT,
]


@pytest.mark.parametrize("value", GOOD)
def test_a_page_of_the_app_is_kept(value):
    assert safe_next(value, P) == value


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_anything_else_leads_to_the_home_page(value):
    assert safe_next(value, P) == P


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/courses/mlmeca-2025/", "/courses/mlmeca-2025/"),
        ("//evil.example/", "/"),
        ("/\t/evil.example/", "/"),
        ("/%2f/evil.example/", "/"),
        ("/\\/evil.example/", "/"),
        ("/.//evil.example/", "/"),
    ],
)
def test_a_standalone_app_keeps_only_its_own_paths(value, expected):
    assert safe_next(value, "/") == expected


# through the real routes: login -> hub -> oauth_callback ------------------------------------------


def fake_hub_api() -> Flask:
    """The two hub API calls of the end of an OAuth sign-in: token for code, user for token."""
    hub = Flask("fake-hub")

    @hub.post("/hub/api/oauth2/token")
    def token():
        assert request.form["code"] == "the-code" and request.form["code_verifier"]
        return jsonify(access_token="hub-token-alice", token_type="Bearer")

    @hub.get("/hub/api/user")
    def user():
        if request.headers.get("Authorization") != "token hub-token-alice":
            return jsonify(error="bad token"), 403
        return jsonify(kind="user", name="alice", admin=False, groups=[], scopes=[])

    return hub


@pytest.fixture(scope="module")
def hub_app(tmp_path_factory, sqlite_template):
    """The course app in hub mode under ``/services/coursehub/``, with a hub API that signs
    in ``alice``."""
    path = tmp_path_factory.mktemp("redirects") / "catalog.sqlite"
    shutil.copyfile(sqlite_template, path)
    with live_server(fake_hub_api()) as hub_url:
        environ = {
            "JUPYTERHUB_API_TOKEN": "service-secret",
            "JUPYTERHUB_CLIENT_ID": "service-coursehub",
            "JUPYTERHUB_SERVICE_PREFIX": P,
            "JUPYTERHUB_API_URL": f"{hub_url}/hub/api",
        }
        app = create_app({"DATABASE_URL": f"sqlite:///{path}", "SECRET_KEY": "s"}, environ=environ)
        try:
            yield app
        finally:
            dispose_app(app)


def sign_in(app, next_value: str) -> tuple[int, str | None]:
    """Start the sign-in with ``next``, let the hub call back; return the final answer."""
    client = app.test_client()
    start = client.get(f"{P}login?next={quote(next_value, safe='')}")
    assert start.status_code == 302
    state = parse_qs(urlsplit(start.location).query)["state"][0]
    done = client.get(f"{P}oauth_callback?code=the-code&state={state}")
    return done.status_code, done.headers.get("Location")


@pytest.mark.parametrize("value", [v for v in BAD if isinstance(v, str) and v], ids=repr)
def test_a_signed_in_user_is_never_sent_to_another_site(hub_app, value):
    assert sign_in(hub_app, value) == (302, P)


@pytest.mark.parametrize("value", GOOD)
def test_a_signed_in_user_comes_back_to_the_page_asked_for(hub_app, value):
    assert sign_in(hub_app, value) == (302, value)


def test_a_forged_state_with_any_characters_is_refused_not_a_500(hub_app):
    client = hub_app.test_client()
    client.get(f"{P}login")
    for state in ("forged", "é", "%00", "\u2028"):
        answer = client.get(f"{P}oauth_callback?code=the-code&state={quote(state)}")
        assert answer.status_code == 403, state
        client.get(f"{P}login")


def test_the_page_asked_for_is_remembered_as_an_ascii_path(hub_app):
    answer = hub_app.test_client().get(f"{P}people/?q=Lef%C3%A8vre")
    assert answer.status_code == 302
    target = parse_qs(urlsplit(answer.location).query)["next"][0]
    assert target == f"{P}people/?q=Lef%C3%A8vre"
    assert sign_in(hub_app, target) == (302, target)


# redirects the app makes by itself: never to the host a request names --------------------------


@pytest.mark.parametrize(
    ("location", "host", "expected"),
    [
        ("http://evil.example/courses/x/", "evil.example", "/courses/x/"),
        ("https://EVIL.example:8443/a/?q=1#f", "evil.example:8443", "/a/?q=1#f"),
        ("http://evil.example//other.example/", "evil.example", "/other.example/"),
        (
            "http://hub.example/hub/api/oauth2/authorize?x=1",
            "app.example",
            "http://hub.example/hub/api/oauth2/authorize?x=1",
        ),
        ("/services/coursehub/", "evil.example", "/services/coursehub/"),
    ],
)
def test_a_redirect_to_the_requests_own_host_becomes_a_path(location, host, expected):
    assert plan_location(location, host) == expected


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8300", "127.0.0.1:8300"])
@pytest.mark.parametrize("page", ["people", "profiles", "courses/mlmeca-2025"])
def test_a_page_without_its_trailing_slash_redirects_to_a_path_whatever_the_host(
    hub_app, host, page
):
    answer = hub_app.test_client().get(f"{P}{page}", headers={"Host": host})
    assert answer.status_code == 308
    assert answer.headers["Location"] == f"{P}{page}/"
