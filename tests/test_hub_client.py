"""The hub REST client: retries against a tiny local server, then the real API against a hub."""

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from coursehub.hub.hubclient import HubClient, HubError, HubUnreachableError, RetryPolicy
from helpers import free_port, wait_until

FAST = RetryPolicy(attempts=4, backoff_s=0.01, backoff_max_s=0.05, timeout_s=5)


class FlakyServer(ThreadingHTTPServer):
    """Answers ``failures`` requests badly (``mode``: "503" or "drop"), then 200 with JSON."""

    def __init__(self, failures: int, mode: str, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), FlakyHandler)
        self.failures, self.mode, self.seen = failures, mode, 0
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hub/api"


class FlakyHandler(BaseHTTPRequestHandler):
    def _answer(self):
        server = self.server
        server.seen += 1
        if server.seen <= server.failures and server.mode == "drop":
            self.close_connection = True
            self.connection.close()
            return
        if server.seen <= server.failures:
            self._json(503, {"status": 503, "message": "hub restarting"})
        elif self.path.startswith("/hub/api/bad"):
            self._json(400, {"status": 400, "message": "No such user: zz"})
        else:
            self._json(200, {"seen": server.seen, "auth": self.headers.get("Authorization")})

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("mode", ["503", "drop"])
def test_retries_then_succeeds(mode):
    with FlakyServer(failures=2, mode=mode) as server:
        answer = HubClient(server.url, "t0k", retry=FAST).request("POST", "/users")
    assert answer == {"seen": 3, "auth": "token t0k"}


def test_gives_up_after_bounded_attempts():
    with FlakyServer(failures=100, mode="503") as server:
        with pytest.raises(HubError) as info:
            HubClient(server.url, "t", retry=FAST).request("GET", "/users")
        assert server.seen == FAST.attempts
    assert info.value.status == 503 and info.value.message == "hub restarting"


def test_4xx_is_not_retried_and_carries_message():
    with FlakyServer(failures=0, mode="503") as server:
        with pytest.raises(HubError) as info:
            HubClient(server.url, "t", retry=FAST).request("POST", "/bad")
        assert server.seen == 1
    error = info.value
    assert (error.status, error.message, error.method, error.path) == (
        400,
        "No such user: zz",
        "POST",
        "/bad",
    )
    assert "POST /bad: 400 No such user: zz" in str(error)


def test_connection_refused_names_the_url():
    url = f"http://127.0.0.1:{free_port()}/hub/api"
    with pytest.raises(HubUnreachableError, match=f"JupyterHub at {url} is unreachable"):
        HubClient(url, "t", retry=FAST).request("GET", "/users")


def test_connection_refused_then_hub_comes_up():
    port = free_port()
    patient = RetryPolicy(attempts=10, backoff_s=0.1, backoff_max_s=1.0, timeout_s=5)
    client = HubClient(f"http://127.0.0.1:{port}", "t", retry=patient)
    server = FlakyServer(failures=0, mode="503", port=port)
    timer = threading.Timer(0.3, server.thread.start)
    timer.start()
    try:
        assert client.request("GET", "/")["seen"] == 1
    finally:
        timer.join()
        server.shutdown()
        server.server_close()


# --- against a real hub --------------------------------------------------------------


@pytest.mark.integration
def test_pagination_over_page_size(live_hub):
    client = HubClient(live_hub.api_url, live_hub.token)
    prefix = f"page-{uuid.uuid4().hex[:6]}-"
    names = [f"{prefix}{i:03d}" for i in range(250)]
    try:
        assert sorted(client.create_users(names, chunk_size=100)) == names
        assert client.create_users(names[:10]) == []  # all exist: 409 tolerated
        pages = list(client.paginate("/users", page_size=50))
        listed = [u["name"] for u in client.list_users()]
    finally:
        for name in names:
            client.delete_user(name)
    assert sorted(n for n in listed if n.startswith(prefix)) == names
    assert len(pages) == len(listed) >= 250
    assert not any(n.startswith(prefix) for n in (u["name"] for u in client.list_users()))


@pytest.mark.integration
def test_group_calls_and_hub_error_message(live_hub):
    client = HubClient(live_hub.api_url, live_hub.token)
    group, user = f"g-{uuid.uuid4().hex[:8]}", f"u-{uuid.uuid4().hex[:8]}"
    client.create_users([user.upper()])  # the hub normalises to lower case
    try:
        client.create_group(group)
        client.create_group(group)  # exists: tolerated
        with pytest.raises(HubError) as info:
            client.create_group(group, exist_ok=False)
        assert info.value.status == 409 and group in info.value.message
        client.add_group_users(group, [user])
        client.set_group_properties(group, {"coursehub": True, "cpu_limit": 1.5})
        with pytest.raises(HubError) as info:
            client.add_group_users(group, ["nobody-here"])
        assert info.value.status == 400 and info.value.message == "No such user: nobody-here"
        model = next(g for g in client.list_groups() if g["name"] == group)
        assert model["users"] == [user]
        assert model["properties"] == {"coursehub": True, "cpu_limit": 1.5}
        client.remove_group_users(group, [user])
        assert next(g for g in client.list_groups() if g["name"] == group)["users"] == []
    finally:
        client.delete_group(group)
        client.delete_user(user)
    assert group not in {g["name"] for g in client.list_groups()}


@pytest.mark.integration
def test_sync_token_is_least_privilege(live_hub):
    client = HubClient(live_hub.api_url, live_hub.token)
    with pytest.raises(HubError) as info:
        client.start_server("anyone")
    assert info.value.status == 403
    with pytest.raises(HubError) as info:
        client.create_service("nope", {"url": "http://127.0.0.1:1"})
    assert info.value.status == 403


@pytest.mark.integration
def test_runtime_services(live_hub):
    client = HubClient(live_hub.api_url, live_hub.admin_token)
    name = f"svc-{uuid.uuid4().hex[:8]}"
    with FlakyServer(failures=0, mode="503") as backend:  # the hub waits for the service's URL
        service_url = backend.url.removesuffix("/hub/api")
        client.create_service(name, {"url": service_url, "display": False})
        try:
            assert name in {s["name"] for s in client.list_services()}
        finally:
            client.delete_service(name)
    assert name not in {s["name"] for s in client.list_services()}
    with pytest.raises(HubError) as info:
        client.delete_service("coursehub-sync")
    assert info.value.status == 405


@pytest.mark.integration
@pytest.mark.slow
def test_server_start_status_stop(live_hub):
    client = HubClient(live_hub.api_url, live_hub.admin_token)
    user = f"srv-{uuid.uuid4().hex[:8]}"
    client.create_users([user])
    try:
        assert client.server_status(user) is None
        assert client.start_server(user) in (201, 202)
        status = wait_until(
            lambda: (s := client.server_status(user)) and s["ready"] and s,
            timeout_s=60,
            interval_s=0.25,
            what=f"{user}'s server to be ready",
        )
        assert status["url"] == f"/user/{user}/"
        assert client.stop_server(user) in (202, 204)
        wait_until(
            lambda: client.server_status(user) is None,
            timeout_s=60,
            interval_s=0.25,
            what=f"{user}'s server to stop",
        )
        assert client.stop_server(user) == 204  # already stopped: fine
    finally:
        client.delete_user(user)


@pytest.mark.integration
@pytest.mark.slow
def test_stop_servers_stops_every_running_server_of_a_user(live_hub):
    client = HubClient(live_hub.api_url, live_hub.admin_token)
    user = f"srv-{uuid.uuid4().hex[:8]}"
    client.create_users([user])
    try:
        assert client.stop_servers(user) == []  # none running: nothing to stop
        assert client.start_server(user) in (201, 202)
        wait_until(
            lambda: (s := client.server_status(user)) and s["ready"],
            timeout_s=60,
            interval_s=0.25,
            what=f"{user}'s server to be ready",
        )
        assert client.stop_servers(user) == [""]
        wait_until(
            lambda: client.server_status(user) is None,
            timeout_s=60,
            interval_s=0.25,
            what=f"{user}'s server to stop",
        )
        assert client.stop_servers(f"nobody-{uuid.uuid4().hex[:6]}") == []
    finally:
        client.delete_user(user)
