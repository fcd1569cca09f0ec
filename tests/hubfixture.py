"""A real JupyterHub for the tests: a pytest plugin with the session-scoped ``hub`` fixture.

The hub runs as a subprocess (``python -m jupyterhub``) in a temporary
directory, on free ports (public proxy, hub, proxy API), with
configurable-http-proxy from npm, ``DummyAuthenticator`` with a test-only
password, its SQLite database in that directory (so that ``restart()`` keeps
users and groups), and two services with least-privilege tokens:

- ``coursehub-sync``: exactly what ``coursehub hub sync`` needs,
  :data:`SYNC_SCOPES`;
- ``coursehub-test``: what the tests use besides (servers, runtime services).

Tests using the fixture are marked ``integration``; they are skipped with the
reason when configurable-http-proxy or jupyterhub is missing. Each test
cleans up the users and groups it creates or uses unique names.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from coursehub.hub.process import HubStartError, start_hub, wait_until_up
from helpers import free_port

#: Scopes of the sync service (JupyterHub 6.x, ``jupyterhub/scopes.py``):
#: ``admin:users`` creates/deletes users (and holds ``list:users``, ``read:users``);
#: ``admin:groups`` creates/deletes groups and holds ``groups``, which member
#: changes and ``PUT /groups/{name}/properties`` need, and ``read:groups``
#: (members and properties in group models).
SYNC_SCOPES = ("admin:users", "admin:groups", "list:users", "read:users")
#: Scopes of the test service: start/stop servers, runtime services, hub info.
TEST_SCOPES = ("admin:users", "admin:groups", "admin:servers", "admin:services", "read:hub")
#: A hub admin created at start-up (``c.Authenticator.admin_users``).
ADMIN_USER = "hubadmin"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


def find_proxy() -> str | None:
    """Return configurable-http-proxy: ``$COURSEHUB_CHP``, ``.venv/node`` (``make setup``), PATH."""
    candidates = [
        os.environ.get("COURSEHUB_CHP", ""),
        str(Path(sys.prefix) / "node" / "node_modules" / ".bin" / "configurable-http-proxy"),
        shutil.which("configurable-http-proxy") or "",
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def render_config(workdir: Path, ports: dict[str, int], proxy: str, extra: str = "") -> str:
    """Return the text of the test hub's ``jupyterhub_config.py`` (tokens come from the env).

    Servers spawn with ``SimpleLocalProcessSpawner`` (test-only: no Unix
    account switch, homes under ``workdir/home``); ``extra`` is appended.
    """
    singleuser = str(Path(sys.executable).parent / "jupyterhub-singleuser")
    root_args = ["--allow-root"] if os.geteuid() == 0 else []
    roles = [
        {"name": "coursehub-sync", "scopes": list(SYNC_SCOPES), "services": ["coursehub-sync"]},
        {"name": "coursehub-test", "scopes": list(TEST_SCOPES), "services": ["coursehub-test"]},
    ]
    return f"""\
import os
c = get_config()  # noqa: F821
c.JupyterHub.bind_url = "http://127.0.0.1:{ports["public"]}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{ports["hub"]}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{ports["proxy_api"]}"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.pid_file = {str(workdir / "proxy.pid")!r}
c.JupyterHub.db_url = {"sqlite:///" + str(workdir / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(workdir / "cookie_secret")!r}
c.JupyterHub.pid_file = {str(workdir / "jupyterhub.pid")!r}
c.JupyterHub.cleanup_servers = True
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ["COURSEHUB_TEST_HUB_PASSWORD"]
c.Authenticator.allow_all = True
c.Authenticator.admin_users = {{"{ADMIN_USER}"}}
c.JupyterHub.services = [
    {{"name": "coursehub-sync", "api_token": os.environ["COURSEHUB_TEST_SYNC_TOKEN"]}},
    {{"name": "coursehub-test", "api_token": os.environ["COURSEHUB_TEST_ADMIN_TOKEN"]}},
]
# 256-bit tokens, checked with one hash as in coursehub's hub configuration
c.JupyterHub.trust_user_provided_tokens = True
c.JupyterHub.load_roles = {roles!r}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(workdir / "home" / "{username}")!r}
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = {root_args!r}
c.Spawner.default_url = "/lab"
{extra}
"""


@dataclass
class RunningHub:
    """A JupyterHub subprocess: URLs, tokens, and ``start()``/``stop()``/``restart()``.

    ``url`` is the public URL (through the proxy), ``api_url`` its
    ``/hub/api``; ``token`` belongs to the ``coursehub-sync`` service,
    ``admin_token`` to ``coursehub-test``; ``password`` logs any user in;
    ``admin_user`` is a hub admin; ``extra_config`` is appended to the
    generated config at the next ``start()``.
    """

    workdir: Path
    proxy: str
    ports: dict[str, int]
    token: str = field(default_factory=lambda: secrets.token_hex(32))
    admin_token: str = field(default_factory=lambda: secrets.token_hex(32))
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    admin_user: str = ADMIN_USER
    extra_config: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['public']}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/hub/api"

    @property
    def log_path(self) -> Path:
        return self.workdir / "jupyterhub.log"

    def start(self) -> None:
        """Start the hub and wait until ``/hub/api/`` answers; raise RuntimeError with the log."""
        config = self.workdir / "jupyterhub_config.py"
        config.write_text(render_config(self.workdir, self.ports, self.proxy, self.extra_config))
        env = {
            **os.environ,
            "COURSEHUB_TEST_SYNC_TOKEN": self.token,
            "COURSEHUB_TEST_ADMIN_TOKEN": self.admin_token,
            "COURSEHUB_TEST_HUB_PASSWORD": self.password,
        }
        with self.log_path.open("ab") as log:
            self.process = start_hub(config, self.workdir, env, log)
        try:
            wait_until_up(self.url, START_TIMEOUT_S, self.process)
        except HubStartError as exc:
            if exc.returncode is None:
                self.stop()
            raise RuntimeError(f"{exc}:\n{self.log_tail()}") from None

    def stop(self) -> None:
        """Stop the hub (SIGTERM, the hub stops its proxy), then kill anything left over."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        children = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        _gone, alive = psutil.wait_procs(children, timeout=5)
        for child in alive:
            child.kill()

    def restart(self) -> None:
        """Stop the hub and start it again on the same ports and database."""
        self.stop()
        self.start()

    def ensure_running(self) -> None:
        """Start the hub again if a test left it stopped."""
        if self.process is None or self.process.poll() is not None:
            self.start()

    def log_tail(self, n_chars: int = 4000) -> str:
        """Return the end of the hub's log."""
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningHub]:
    """A running JupyterHub shared by the session's tests (started again if a test stopped it)."""
    proxy = find_proxy()
    if proxy is None:
        pytest.skip(
            "configurable-http-proxy not found: `npm install --prefix .venv/node "
            "configurable-http-proxy@5` (make setup) or set COURSEHUB_CHP"
        )
    pytest.importorskip("jupyterhub", reason="jupyterhub is not installed")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    running = RunningHub(tmp_path_factory.mktemp("jupyterhub"), proxy, ports)
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def live_hub(hub: RunningHub) -> RunningHub:
    """The session's hub, started again first if an earlier test stopped it."""
    hub.ensure_running()
    return hub
