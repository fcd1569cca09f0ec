"""The course app's hub token check from many request threads at once (a class's exam starts)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flask import Flask
from jupyterhub.services.auth import HubOAuth

from coursehub.web.auth import HUB_AUTH_KEY, resolve_hub_token


class FakeHub(BaseHTTPRequestHandler):
    """``GET /hub/api/user``: the token's owner (``token u-<name>``), a little slowly."""

    def do_GET(self) -> None:
        time.sleep(0.05)
        name = self.headers.get("Authorization", "").removeprefix("token u-")
        body = json.dumps({"kind": "user", "name": name, "admin": False, "groups": []})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_the_first_tokens_checked_at_once_all_resolve():
    """HubAuth's first blocking calls from several threads used to fail with
    "This event loop is already running" (an HTTP 500: the exam not checked)."""
    hub = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    app = Flask(__name__)
    app.extensions[HUB_AUTH_KEY] = HubOAuth(
        api_token="service-token",
        api_url=f"http://127.0.0.1:{hub.server_address[1]}/hub/api",
        oauth_client_id="service-coursehub",
        access_scopes=set(),
        cache_max_age=60,
    )

    def resolve(n: int) -> str:
        with app.app_context():
            identity = resolve_hub_token(f"u-student{n}")
            return identity.name if identity else ""

    try:
        with ThreadPoolExecutor(16) as pool:
            names = list(pool.map(resolve, range(16)))
    finally:
        hub.shutdown()
        hub.server_close()
    assert names == [f"student{n}" for n in range(16)]
