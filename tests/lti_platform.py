"""A small LMS platform for tests: LTI 1.3 launches, and the LTI Advantage side.

:class:`Platform` (the launch) has its own RSA key pair and serves, on
127.0.0.1 over plain HTTP, its key set (``GET /jwks``) and the OIDC
authorization endpoint (``GET /auth``), which answers with the
auto-submitted form carrying the signed ``id_token`` (IMS Security Framework
1.0, section 5.1.1) for the :class:`LaunchSpec` named by
``lti_message_hint``. :meth:`Platform.serve_site` serves the same pages over
HTTPS too, plus ``GET /activity?hint=H``: the LMS activity link, whose page
auto-submits the OIDC login initiation to the tool as Moodle's launch page
does (its "New window" launch container), so that a real browser on the
LMS's site name makes the launch cross-site.

:class:`AgsPlatform` serves on 127.0.0.1:

- ``POST /token``: the OAuth 2.0 client-credentials grant with a JWT client
  assertion (IMS Security Framework 1.0, section 4.1; RFC 7523). The
  assertion is verified against the tool's key set fetched from
  :attr:`AgsPlatform.tool_jwks_url` (PyJWT's ``PyJWKClient``), with
  ``iss == sub ==`` the client id and ``aud ==`` the token URL; a bearer token
  is given for the scopes asked. :attr:`AgsPlatform.refuse_tokens` makes it
  answer 401 ``invalid_client``.
- ``GET|POST /lineitems``: the context's line items (LTI AGS 2.0, section
  3.2), filtered by ``resource_id``; a created one's URL has a query string,
  as Moodle's do.
- ``POST /lineitems/<n>/scores``: a score (section 3.4), recorded; a score
  for a user in :attr:`AgsPlatform.refuse_users` is answered 400.

Every AGS request must carry a bearer token this platform gave. What it got
is in :attr:`token_requests`, :attr:`line_items` and :attr:`scores`.
"""

from __future__ import annotations

import html
import json
import secrets
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID = "coursehub-tool"
AGS = "https://purl.imsglobal.org/spec/lti-ags/"
AGS_CLAIM = AGS + "claim/endpoint"
SCOPES = [AGS + "scope/lineitem", AGS + "scope/result.readonly", AGS + "scope/score"]
DEPLOYMENT_ID = "3"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
LEARNER = f"{MEMBERSHIP}#Learner"
INSTRUCTOR = f"{MEMBERSHIP}#Instructor"
TA = f"{MEMBERSHIP}#TeachingAssistant"
TA_SUBROLE = f"{MEMBERSHIP}/Instructor#TeachingAssistant"
INSTITUTION_INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor"
SYSTEM_ADMIN = "http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator"
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
LINKED_CONTEXT = "moodle-course-42"


@dataclass
class LaunchSpec:
    """What the LMS puts in one launch, and how a test tampers with it."""

    username: str
    roles: list[str]
    context_id: str = LINKED_CONTEXT
    context_title: str = "Machine learning for mechanics (Moodle)"
    email: str | None = None
    student_number: str | None = None
    notebook: str | None = None
    subject: str = field(default_factory=lambda: secrets.token_hex(8))
    audience: str = CLIENT_ID
    issuer: str | None = None
    deployment_id: str = DEPLOYMENT_ID
    lifetime_s: int = 300
    foreign_key: bool = False


class Platform:
    """A minimal LTI 1.3 platform: key pair, JWKS endpoint, OIDC authorization endpoint.

    ``tool_url`` is the hub's public URL, where ``/activity`` sends the login
    initiation (set it before a browser opens the activity).
    """

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.launches: dict[str, LaunchSpec] = {}
        self.tool_url = ""
        self.servers: list[ThreadingHTTPServer] = []
        self.server = self._serve(None)
        self.issuer = f"http://127.0.0.1:{self.server.server_port}"

    def serve_site(self, context: ssl.SSLContext | None) -> int:
        """Serve the same pages and ``/activity`` on 127.0.0.1, over HTTPS with ``context``
        (else plain HTTP); return the port."""
        return int(self._serve(context, site=True).server_port)

    def _serve(self, context: ssl.SSLContext | None, site: bool = False) -> ThreadingHTTPServer:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path == "/jwks":
                    self.answer(200, "application/json", json.dumps(platform.jwks()))
                elif parts.path == "/auth":
                    self.answer(200, "text/html", platform.authorize(query))
                elif parts.path == "/activity" and site:
                    self.answer(200, "text/html", platform.activity(query["hint"]))
                else:
                    self.answer(404, "text/plain", "not found")

            def answer(self, status: int, kind: str, text: str) -> None:
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)
        return server

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def activity(self, hint: str) -> str:
        """The LMS activity page: the auto-submitted OIDC login initiation (section 5.1.1.1)."""
        spec = self.launches[hint]
        fields = {
            "iss": spec.issuer or self.issuer,
            "login_hint": spec.subject,
            "target_link_uri": self.tool_url + "/hub/",
            "client_id": CLIENT_ID,
            "lti_deployment_id": spec.deployment_id,
            "lti_message_hint": hint,
        }
        inputs = "".join(
            f'<input type="hidden" name="{name}" value="{html.escape(value)}">'
            for name, value in fields.items()
        )
        action = html.escape(self.tool_url + "/hub/lti13/oauth_login")
        return (
            f'<form method="post" action="{action}">{inputs}</form>'
            "<script>document.forms[0].submit()</script>"
        )

    def jwks(self) -> dict[str, Any]:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": "platform-key", "alg": "RS256", "use": "sig"}]}

    def authorize(self, query: dict[str, str]) -> str:
        """The authorization endpoint: the auto-submitted form with the signed id_token."""
        spec = self.launches[query["lti_message_hint"]]
        now = int(time.time())
        custom = {"username": spec.username}
        if spec.student_number:
            custom["student_number"] = spec.student_number
        if spec.notebook:
            custom["notebook"] = spec.notebook
        claims: dict[str, Any] = {
            "iss": spec.issuer or self.issuer,
            "aud": spec.audience,
            "sub": spec.subject,
            "iat": now - 5,
            "exp": now + spec.lifetime_s,
            "nonce": query["nonce"],
            "email": spec.email,
            "given_name": spec.username.capitalize(),
            "family_name": "Testeur",
            LTI + "message_type": "LtiResourceLinkRequest",
            LTI + "version": "1.3.0",
            LTI + "deployment_id": spec.deployment_id,
            LTI + "target_link_uri": query["redirect_uri"],
            LTI + "resource_link": {"id": "activity-7"},
            LTI + "roles": spec.roles,
            LTI + "context": {
                "id": spec.context_id,
                "label": "MLMECA",
                "title": spec.context_title,
            },
            LTI + "custom": custom,
        }
        key = self.other_key if spec.foreign_key else self.key
        token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "platform-key"})
        return (
            f'<form method="post" action="{html.escape(query["redirect_uri"])}">'
            f'<input type="hidden" name="id_token" value="{token}">'
            f'<input type="hidden" name="state" value="{html.escape(query["state"])}">'
            "</form><script>document.forms[0].submit()</script>"
        )


class AgsPlatform:
    """The token endpoint and AGS endpoints of an LMS, recording what they got."""

    def __init__(self, client_id: str = CLIENT_ID) -> None:
        self.client_id = client_id
        self.tool_jwks_url = ""
        self.refuse_tokens = False
        self.refuse_users: set[str] = set()
        self.tokens: set[str] = set()
        self.token_requests: list[dict[str, Any]] = []
        self.line_items: list[dict[str, Any]] = []
        self.scores: list[tuple[int, dict[str, Any]]] = []
        self.lock = threading.Lock()
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if not platform.authorized(self.headers.get("Authorization")):
                    self.answer(401, {"error": "invalid_token"})
                elif parts.path == "/lineitems":
                    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                    wanted = query.get("resource_id")
                    items = [
                        i for i in platform.line_items if not wanted or i["resourceId"] == wanted
                    ]
                    self.answer(200, items, "application/vnd.ims.lis.v2.lineitemcontainer+json")
                else:
                    self.answer(404, {"error": "not found"})

            def do_POST(self) -> None:
                parts = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if parts.path == "/token":
                    form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                    self.answer(*platform.token(form))
                    return
                if not platform.authorized(self.headers.get("Authorization")):
                    self.answer(401, {"error": "invalid_token"})
                    return
                body = json.loads(raw or b"{}")
                kind = self.headers.get("Content-Type", "")
                if parts.path == "/lineitems" and kind.startswith(
                    "application/vnd.ims.lis.v2.lineitem+json"
                ):
                    self.answer(201, platform.create_line_item(body))
                elif parts.path.endswith("/scores") and kind.startswith(
                    "application/vnd.ims.lis.v1.score+json"
                ):
                    number = int(parts.path.split("/")[2])
                    if body.get("userId") in platform.refuse_users:
                        self.answer(400, {"error": "user is not enrolled in this course"})
                        return
                    with platform.lock:
                        platform.scores.append((number, body))
                    self.answer(204, None)
                else:
                    self.answer(415, {"error": f"unexpected {parts.path} {kind}"})

            def answer(self, status: int, data: Any, kind: str = "application/json") -> None:
                body = b"" if data is None else json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_port}"
        self.token_url = self.issuer + "/token"
        self.lineitems_url = self.issuer + "/lineitems"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def ags_claim(self) -> dict[str, Any]:
        """The AGS claim a launch from this platform's LMS course carries."""
        return {"scope": SCOPES, "lineitems": self.lineitems_url}

    def authorized(self, header: str | None) -> bool:
        scheme, _, token = (header or "").partition(" ")
        return scheme == "Bearer" and token in self.tokens

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The token endpoint: verify the client assertion against the tool's key set."""
        if self.refuse_tokens:
            return 401, {"error": "invalid_client", "error_description": "unknown key"}
        if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != (
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        ):
            return 400, {"error": "unsupported_grant_type"}
        assertion = form.get("client_assertion", "")
        try:
            key = jwt.PyJWKClient(self.tool_jwks_url).get_signing_key_from_jwt(assertion)
            claims = jwt.decode(
                assertion,
                key.key,
                algorithms=["RS256"],
                audience=self.token_url,
                issuer=self.client_id,
                options={"require": ["iss", "sub", "aud", "iat", "exp", "jti"]},
            )
        except jwt.PyJWTError as exc:
            return 401, {"error": "invalid_client", "error_description": str(exc)}
        if claims["sub"] != self.client_id:
            return 401, {"error": "invalid_client", "error_description": "sub"}
        token = secrets.token_hex(16)
        with self.lock:
            self.tokens.add(token)
            self.token_requests.append({"claims": claims, "scope": form.get("scope", "")})
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": 3600,
            "scope": form.get("scope", ""),
        }

    def create_line_item(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            number = len(self.line_items) + 1
            item = {**body, "id": f"{self.lineitems_url}/{number}/lineitem?type_id=7"}
            self.line_items.append(item)
        return item
