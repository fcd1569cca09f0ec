"""LTI 1.3 launches in real Chromium, the LMS and the hub on two sites: signed in over HTTPS.

The LMS (:class:`lti_platform.Platform`, its pages on ``lms.example``) and
the hub (a real JupyterHub with
:class:`coursehub.spawn.lti.CoursehubLTIAuthenticator`, through
configurable-http-proxy, on ``hub.test``) are two sites, both names resolved
to 127.0.0.1 by Chromium's ``--host-resolver-rules``. The LMS activity page
auto-submits the login initiation to the hub, the hub sets its state and
nonce cookies and redirects to the LMS's authorization endpoint, whose page
auto-submits the ``id_token`` back to the hub: a cross-site POST, as Moodle's
launch (jupyterhub/ltiauthenticator#157). Nothing drops or adds cookies by
hand: what comes back is what Chromium sends.

Over HTTPS (a certificate made here for both names, the proxy serving it with
``c.JupyterHub.ssl_cert``; Chromium with ``--ignore-certificate-errors``) the
cookies are ``SameSite=None; Secure`` and the launch signs in. Over plain
HTTP the cookies have no SameSite, so browsers treat them as ``Lax``; Chromium
still sends such a cookie with a cross-site top-level POST while it is less
than 2 minutes old (its temporary "Lax+POST" exception), so a quick launch
passes and one that takes longer (the student signs in to the LMS first)
does not. The plain HTTP test runs Chromium with that exception off
(:data:`STRICT_LAX_FEATURE`), as for a launch past those 2 minutes: the launch
ends on the hub's 400 page, which says that LMS launches need the hub over
HTTPS.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import secrets
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.lti.links import Context, confirm_link, find_link
from coursehub.web.database import ENGINE_KEY
from coursehub.web.testing import live_server, make_test_app, seed_web_catalog
from helpers import free_port
from hubfixture import RunningHub, find_proxy
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    INSTRUCTOR,
    LEARNER,
    LINKED_CONTEXT,
    LaunchSpec,
    Platform,
)

CHROMIUM = "/usr/bin/chromium"
HUB_NAME = "hub.test"
LMS_NAME = "lms.example"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--host-resolver-rules=MAP {HUB_NAME} 127.0.0.1, MAP {LMS_NAME} 127.0.0.1",
    "--ignore-certificate-errors",
]
#: Chromium's feature that ends the temporary "Lax+POST" exception: a cookie without
#: SameSite set less than 2 minutes ago is still sent with a cross-site top-level POST
#: (https://www.chromium.org/updates/same-site/faq/, "Lax + POST mitigation").
STRICT_LAX_FEATURE = "SameSiteDefaultChecksMethodRigorously"
STATE_COOKIES = ("lti13authenticator-state", "lti13authenticator-nonce-state")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
    ),
]


def write_certificate(folder: Path, names: tuple[str, ...]) -> tuple[Path, Path]:
    """Write a self-signed certificate for ``names`` and 127.0.0.1; return (cert, key) paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    alt_names = [x509.DNSName(n) for n in names] + [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "tls.crt", folder / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@dataclass
class TlsHub(RunningHub):
    """The test hub, its proxy serving HTTPS when ``scheme`` is ``https``."""

    scheme: str = "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.ports['public']}"


@dataclass
class Sites:
    """The hub and the LMS as the browser reaches them, and the catalog behind the hub."""

    hub: TlsHub
    platform: Platform
    hub_url: str
    lms_url: str
    catalog_url: str
    course_id: str


def link_course(catalog_url: str, issuer: str, course_id: str) -> None:
    """Confirm the pending LMS course (made by the Instructor's first launch) as the lead."""
    engine = make_engine(catalog_url)
    try:
        with session_scope(engine) as session:
            link = find_link(session, Context(issuer, DEPLOYMENT_ID, LINKED_CONTEXT))
            assert link is not None and link.pending
            confirm_link(session, link, get_course(session, course_id), "mbuffat")
    finally:
        engine.dispose()


def platform_registrations(platform: Platform, lms_url: str) -> list[dict[str, object]]:
    """The hub's one registration: the LMS's pages on its site, its key set on 127.0.0.1."""
    return [
        {
            "issuer": platform.issuer,
            "client_ids": [CLIENT_ID],
            "deployment_ids": [DEPLOYMENT_ID],
            "authorize_url": lms_url + "/auth",
            "jwks_url": platform.issuer + "/jwks",
            "username_claim": "custom_username",
            "student_number_claim": "custom_student_number",
        }
    ]


@contextlib.contextmanager
def open_sites(scheme: str, workdir: Path, sqlite_template: Path) -> Iterator[Sites]:
    """The LMS on ``lms.example`` and the hub on ``hub.test``, both over ``scheme``."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    cert, key = write_certificate(workdir, (HUB_NAME, LMS_NAME))
    catalog = workdir / "catalog.sqlite"
    catalog.write_bytes(sqlite_template.read_bytes())
    url = f"sqlite:///{catalog}"
    course_id = seed_web_catalog(url)
    platform = Platform()
    context = None
    if scheme == "https":
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    lms_url = f"{scheme}://{LMS_NAME}:{platform.serve_site(context)}"
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = TlsHub(workdir / "hub", proxy, ports, scheme=scheme)
    hub.workdir.mkdir()
    platform.tool_url = f"{scheme}://{HUB_NAME}:{ports['public']}"
    launch_token = secrets.token_hex(16)
    app = make_test_app(
        url,
        HUB_SYNC_URL=f"http://127.0.0.1:{ports['hub']}/hub/api",
        HUB_SYNC_TOKEN=hub.token,
        LTI_LAUNCH_TOKEN=launch_token,
    )
    tls = f"c.JupyterHub.ssl_cert = {str(cert)!r}\nc.JupyterHub.ssl_key = {str(key)!r}\n"
    with live_server(app) as app_url, pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSL_CERT_FILE", str(cert))  # the readiness poll of hub.start() over HTTPS
        hub.extra_config = f"""
c.JupyterHub.authenticator_class = "coursehub.spawn.lti.CoursehubLTIAuthenticator"
c.CoursehubLTIAuthenticator.password_authenticator_class = "dummy"
c.CoursehubLTIAuthenticator.platforms = {platform_registrations(platform, lms_url)!r}
c.CoursehubLTIAuthenticator.launch_url = {app_url + "/api/v1/lti/launch"!r}
c.CoursehubLTIAuthenticator.launch_token = {launch_token!r}
c.Authenticator.allow_all = False
c.Authenticator.allow_existing_users = True
c.JupyterHub.default_url = "/hub/home"
{tls if scheme == "https" else ""}"""
        hub.start()
        try:
            yield Sites(hub, platform, platform.tool_url, lms_url, url, course_id)
        finally:
            hub.stop()
            platform.close()
            app.extensions[ENGINE_KEY].dispose()


@pytest.fixture(scope="module")
def https_sites(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Sites]:
    with open_sites("https", tmp_path_factory.mktemp("lti-https"), sqlite_template) as sites:
        yield sites


@pytest.fixture(scope="module")
def http_sites(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Sites]:
    with open_sites("http", tmp_path_factory.mktemp("lti-http"), sqlite_template) as sites:
        yield sites


def open_chromium(args: list[str]) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=args, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    """Chromium as it comes."""
    yield from open_chromium(ARGS)


@pytest.fixture
def strict_browser() -> Iterator[Any]:
    """Chromium without its "Lax+POST" exception for cookies set in the last 2 minutes."""
    yield from open_chromium([*ARGS, f"--enable-features={STRICT_LAX_FEATURE}"])


@dataclass
class BrowserLaunch:
    """What Chromium got: the login initiation's cookies, the launch's answer and its frame."""

    state_cookies: list[str]
    callback_status: int
    page: Any
    frame: Any

    def text(self) -> str:
        """The text of the hub's answer to the launch, whitespace collapsed."""
        return " ".join(self.frame.locator("body").inner_text().split())


def launch_in_browser(browser: Any, sites: Sites, spec: LaunchSpec) -> BrowserLaunch:
    """Open the LMS activity in a fresh Chromium profile; return once the hub answered it."""
    hint = secrets.token_hex(8)
    sites.platform.launches[hint] = spec
    page = browser.new_context().new_page()
    initiations: list[Any] = []
    page.on("response", lambda r: initiations.append(r) if "/lti13/oauth_login" in r.url else None)
    with page.expect_response(lambda r: "/hub/lti13/oauth_callback" in r.url) as callback:
        page.goto(f"{sites.lms_url}/activity?hint={hint}")
    page.wait_for_load_state()
    (initiation,) = initiations
    set_cookies = [
        line
        for line in initiation.header_values("set-cookie")
        if line.split("=", 1)[0] in STATE_COOKIES
    ]
    return BrowserLaunch(set_cookies, callback.value.status, page, callback.value.frame)


def test_over_https_a_cross_site_launch_brings_its_cookies_back_and_signs_in(
    strict_browser, https_sites
):
    """Without the Lax+POST exception too: the cookies are SameSite=None, not Lax."""
    sites, browser = https_sites, strict_browser
    first = launch_in_browser(browser, sites, LaunchSpec("mbuffat", [INSTRUCTOR]))
    # past the state and nonce checks: the course app's answer to an unlinked LMS course
    assert first.callback_status == 403, first.text()
    assert "is not linked to a course" in first.text()
    assert len(first.state_cookies) == 2, first.state_cookies
    for line in first.state_cookies:
        attributes = {a.strip().lower() for a in line.split(";")[1:]}
        assert {"samesite=none", "secure", "httponly"} <= attributes, line
    link_course(sites.catalog_url, sites.platform.issuer, sites.course_id)
    username = f"lti{secrets.token_hex(3)}"
    second = launch_in_browser(browser, sites, LaunchSpec(username, [LEARNER]))
    assert second.callback_status == 302, second.text()
    second.page.wait_for_url(f"{sites.hub_url}/hub/home")
    assert username in second.page.locator("#login_widget").inner_text()
    cookies = {c["name"]: c for c in second.page.context.cookies(sites.hub_url + "/hub/")}
    assert cookies["jupyterhub-hub-login"]["secure"] is True


def test_over_https_an_unlinked_lms_course_gets_past_the_state_check(browser, https_sites):
    """The course app's refusal shows that the state and nonce cookies came back."""
    spec = LaunchSpec("ltiunlinked", [LEARNER], context_id="moodle-unlinked")
    launch = launch_in_browser(browser, https_sites, spec)
    assert launch.callback_status == 403, launch.text()
    assert "is not linked to a course" in launch.text()


def test_over_http_a_launch_without_its_cookies_names_the_https_need(strict_browser, http_sites):
    spec = LaunchSpec("ltiplainhttp", [LEARNER])
    launch = launch_in_browser(strict_browser, http_sites, spec)
    assert launch.state_cookies
    assert not any("samesite=none" in c.lower() for c in launch.state_cookies)
    assert launch.callback_status == 400, launch.text()
    assert "serve the hub over HTTPS for LMS launches" in launch.text()
    assert "jupyterhub-hub-login" not in {c["name"] for c in launch.page.context.cookies()}
