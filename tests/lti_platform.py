"""A small LMS platform's LTI Advantage side for tests: token endpoint, line items, scores.

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

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt

CLIENT_ID = "coursehub-tool"
AGS = "https://purl.imsglobal.org/spec/lti-ags/"
AGS_CLAIM = AGS + "claim/endpoint"
SCOPES = [AGS + "scope/lineitem", AGS + "scope/result.readonly", AGS + "scope/score"]


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
