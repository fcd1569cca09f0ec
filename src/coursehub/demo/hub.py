"""Run the whole system on one machine: ``coursehub demo``.

Layout of the data directory (kept across restarts; nothing is re-seeded):

``catalog.sqlite``             the course catalog (migrated, seeded once)
``demo-secrets.json``          the demo password and the course app's hub token
``jupyterhub.sqlite``          the hub's database (and its cookie secret next to it)
``hub/jupyterhub_config.py``   rendered at each start (:mod:`coursehub.hub.config`)
``hub/jupyterhub.log``         the hub's, proxy's and services' output
``nbgrader/courses/{course_id}`` a course set up for grading; its formgrader runs
                               as the hub service ``{course_id}``
``homes/{username}``           each user's home (the pendulum notebook is copied
                               there on first spawn)

Start-up: migrate and seed the catalog, render the hub configuration, start
``python -m jupyterhub`` (which starts configurable-http-proxy and the course
app at ``/services/coursehub/``), wait for its API, sync the catalog into hub
users and groups, print the URL and the accounts.

Stop: Ctrl-C, SIGTERM or SIGHUP, even when started in the background
(``nohup make demo &``, where SIGINT is ignored: explicit handlers replace
that). The hub starts with default signal dispositions and is stopped with
SIGTERM (it stops its servers, services and proxy); after
:data:`HUB_STOP_TIMEOUT_S`, its process group and any descendant left
(servers run in their own sessions) are killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from coursehub.errors import CoursehubError, UsageError

if TYPE_CHECKING:
    from coursehub.grading.layout import CourseLayout

SERVICE_NAME = "coursehub"
HUB_START_TIMEOUT_S = 90.0
#: Seconds the hub gets to stop its servers, services and proxy after SIGTERM.
HUB_STOP_TIMEOUT_S = 30.0
#: Seconds a process left after the hub gets between SIGTERM and SIGKILL.
LEFTOVER_STOP_TIMEOUT_S = 5.0
#: Signals that stop the demo.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class DemoSecrets:
    """The shared demo password and the course app's hub API token."""

    password: str
    service_token: str


def load_secrets(data_dir: Path) -> DemoSecrets:
    """Return the data directory's secrets, creating them (mode 0600) on first use."""
    path = data_dir / "demo-secrets.json"
    if path.exists():
        data = json.loads(path.read_text())
        return DemoSecrets(data["password"], data["service_token"])
    made = DemoSecrets(secrets.token_urlsafe(9), secrets.token_hex(32))
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"password": made.password, "service_token": made.service_token}, handle)
    os.replace(tmp, path)
    return made


def find_proxy() -> str:
    """Return configurable-http-proxy: ``$COURSEHUB_CHP``, ``<venv>/node`` (make setup), PATH.

    Raises
    ------
    UsageError
        If it is nowhere; the message gives the install command.
    """
    import shutil

    candidates = [
        os.environ.get("COURSEHUB_CHP", ""),
        str(Path(sys.prefix) / "node" / "node_modules" / ".bin" / "configurable-http-proxy"),
        shutil.which("configurable-http-proxy") or "",
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise UsageError(
        "configurable-http-proxy not found: run `make setup` (npm install --prefix "
        ".venv/node configurable-http-proxy@5) or set COURSEHUB_CHP"
    )


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare_catalog(data_dir: Path) -> tuple[str, bool]:
    """Migrate the catalog and seed it on first start; return ``(database_url, seeded_now)``.

    Seeding also sets the first course up for nbgrader under ``data_dir/nbgrader``
    and releases its demo assignment.
    """
    from coursehub.catalog.db import make_engine, session_scope
    from coursehub.catalog.schema import upgrade_database
    from coursehub.demo.seed import is_seeded, seed_catalog
    from coursehub.grading.demo import setup_demo_grading

    url = f"sqlite:///{data_dir / 'catalog.sqlite'}"
    engine = make_engine(url)
    try:
        upgrade_database(engine)
        with session_scope(engine) as session:
            if is_seeded(session):
                return url, False
            course_ids = seed_catalog(session)
            setup_demo_grading(
                session,
                course_ids[0],
                data_dir / "nbgrader" / "courses",
                data_dir / "nbgrader" / "exchange",
                data_dir / "nbgrader" / "jupyter",
            )
        return url, True
    finally:
        engine.dispose()


def demo_spawn_limit(override: str | None = None) -> int:
    """Return the demo's ``concurrent_spawn_limit``: ``override``, else this machine's rule.

    The rule is :func:`coursehub.hub.config.plan_spawn_limit` of the CPUs this
    process may use (:func:`coursehub.resources.cpus.effective_cpus`), as the
    demo's servers run here.

    Raises
    ------
    UsageError
        If ``override`` (``$COURSEHUB_SPAWN_LIMIT``) is not a positive integer.
    """
    from coursehub.hub.config import plan_spawn_limit
    from coursehub.resources.cpus import effective_cpus

    if override is None or override == "":
        return plan_spawn_limit(effective_cpus())
    if not override.isdigit() or int(override) < 1:
        raise UsageError(f"COURSEHUB_SPAWN_LIMIT must be a positive integer, got {override!r}")
    return int(override)


def grading_layouts(data_dir: Path) -> list[CourseLayout]:
    """Return the layouts of the demo's courses set up for grading (with ``nbgrader_config.py``)."""
    from coursehub.grading.layout import make_layout

    root = data_dir / "nbgrader" / "courses"
    found = sorted(p.parent.name for p in root.glob("*/nbgrader_config.py"))
    return [make_layout(c, root, data_dir / "nbgrader" / "exchange", single_user=True)
            for c in found]  # fmt: skip


def render_demo_config(
    data_dir: Path,
    port: int,
    ip: str,
    database_url: str,
    spawn_limit: int,
    formgraders: Sequence[CourseLayout] = (),
) -> str:
    """Return the demo hub's ``jupyterhub_config.py`` (free ports for the hub, proxy API, app).

    Each course of ``formgraders`` gets its formgrader as a hub service named
    after it (:func:`coursehub.grading.hubservice.render_formgrader_config`,
    token from ``FORMGRADER_TOKEN_<COURSE_ID>``), reached by its team group.
    """
    from coursehub.grading.hubservice import render_formgrader_config
    from coursehub.hub.config import HubSettings, render_hub_config

    service_port = free_port()
    settings = replace(
        HubSettings(),
        kind="local",
        demo=True,
        data_dir=str(data_dir),
        bind_url=f"http://{ip}:{port}",
        hub_bind_url=f"http://127.0.0.1:{free_port()}",
        proxy_api_url=f"http://127.0.0.1:{free_port()}",
        proxy_command=(find_proxy(),),
        service_url=f"http://127.0.0.1:{service_port}",
        service_command=(sys.executable, "-m", "coursehub", "web", "serve"),
        database_url=database_url,
        concurrent_spawn_limit=spawn_limit,
        formgrader_courses=tuple(layout.course_id for layout in formgraders),
    )
    text = render_hub_config(settings)
    if formgraders:
        ports = [free_port() for _ in formgraders]
        text += "\n" + render_formgrader_config(
            formgraders, python=sys.executable, ports=ports, allow_root=os.geteuid() == 0
        )
    return text


class DemoHub:
    """The hub subprocess of the demo: start, wait until it answers, sync, stop.

    ``spawn_limit`` is its ``concurrent_spawn_limit``; None: ``$COURSEHUB_SPAWN_LIMIT``,
    else :func:`demo_spawn_limit` of this machine.
    """

    def __init__(self, data_dir: Path, port: int, ip: str, spawn_limit: int | None = None) -> None:
        self.data_dir, self.port, self.ip = data_dir, port, ip
        self.spawn_limit = spawn_limit or demo_spawn_limit(os.environ.get("COURSEHUB_SPAWN_LIMIT"))
        self.hub_dir = data_dir / "hub"
        self.process: subprocess.Popen[bytes] | None = None
        self.secrets = load_secrets(data_dir)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.ip in ("", "0.0.0.0") else self.ip
        return f"http://{host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.hub_dir / "jupyterhub.log"

    def start(self, database_url: str) -> None:
        """Render the config and start the hub; return once its API answers.

        Raises
        ------
        CoursehubError
            If the hub exits or does not answer within the timeout (with the log's end).
        """
        self.hub_dir.mkdir(parents=True, exist_ok=True)
        from coursehub.grading.hubservice import token_variable

        config = self.hub_dir / "jupyterhub_config.py"
        formgraders = grading_layouts(self.data_dir)
        text = render_demo_config(
            self.data_dir, self.port, self.ip, database_url, self.spawn_limit, formgraders
        )
        config.write_text(text)
        env = {
            **os.environ,
            "COURSEHUB_DEMO_PASSWORD": self.secrets.password,
            "COURSEHUB_DEMO_SERVICE_TOKEN": self.secrets.service_token,
            "COURSEHUB_DATABASE_URL": database_url,
            "COURSEHUB_DATA_DIR": str(self.data_dir),
            # fresh at each start: the hub takes configured service tokens at start-up
            **{token_variable(fg.course_id): secrets.token_hex(32) for fg in formgraders},
        }
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(config)],
                cwd=self.hub_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_default_signals,
            )  # fmt: skip
        self._wait_up()

    def _wait_up(self) -> None:
        import requests

        deadline = time.monotonic() + HUB_START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise CoursehubError(f"the hub exited ({self.process.returncode}):\n{self._tail()}")
            try:
                if requests.get(f"{self.url}/hub/api/", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        self.stop()
        raise CoursehubError(
            f"the hub did not answer within {HUB_START_TIMEOUT_S:g} s:\n{self._tail()}"
        )

    def _tail(self, n_chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""

    def sync(self, database_url: str) -> Any:
        """Sync the catalog into the hub (users, course groups, profiles); return the report.

        Each synced course records the time and status (``last_sync_at``,
        ``last_sync_status``) that its page shows.
        """
        from coursehub.catalog.db import make_engine, session_scope
        from coursehub.hub.hubclient import HubClient
        from coursehub.hub.sync import (
            actual_state,
            apply_sync,
            course_specs,
            desired_from_courses,
            plan_sync,
            record_sync_status,
        )

        engine = make_engine(database_url)
        client = HubClient(f"{self.url}/hub/api", self.secrets.service_token)
        try:
            with session_scope(engine) as session:
                courses = course_specs(session)
            desired = desired_from_courses(courses)
            report = apply_sync(plan_sync(desired, actual_state(client)), client)
            with session_scope(engine) as session:
                record_sync_status(session, [c.course_id for c in courses], report)
            return report
        finally:
            client.close()
            engine.dispose()

    def stop(self) -> None:
        """Stop the hub (SIGTERM, then SIGKILL after the grace), then whatever it left.

        The hub's descendants are listed before it stops (orphans lose their
        parent); its process group (the proxy, services) and those left
        (servers run in their own sessions) get SIGTERM, then SIGKILL.
        """
        import psutil

        process, self.process = self.process, None
        if process is None:
            return
        try:
            children = psutil.Process(process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(HUB_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                print(f"coursehub demo: the hub did not stop within {HUB_STOP_TIMEOUT_S:g} s "
                      "of SIGTERM; killed", file=sys.stderr, flush=True)  # fmt: skip
                process.kill()
                process.wait()
        _kill_group(process.pid, signal.SIGTERM)
        _gone, alive = psutil.wait_procs(children, timeout=LEFTOVER_STOP_TIMEOUT_S)
        for child in alive:
            child.kill()
        _kill_group(process.pid, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=LEFTOVER_STOP_TIMEOUT_S)

    def wait(self) -> int:
        """Block until the hub exits; return its status."""
        assert self.process is not None
        return self.process.wait()


def _default_signals() -> None:
    """In the hub's child process: default dispositions, so that it handles SIGINT and SIGTERM.

    A background job of a non-interactive shell starts with SIGINT ignored,
    and an ignored signal stays ignored across ``exec``.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def _kill_group(pgid: int, signum: int) -> None:
    """Send ``signum`` to the process group ``pgid`` if any of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_demo(data_dir: Path, port: int, ip: str = "127.0.0.1") -> int:
    """Run the demo until Ctrl-C; return the exit status (0 after a clean stop)."""
    from coursehub.demo.accounts import render_banner

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    database_url, seeded = prepare_catalog(data_dir)
    print(f"coursehub demo: catalog {'seeded' if seeded else 'kept'} in {data_dir}", flush=True)
    hub = DemoHub(data_dir, port, ip)
    previous = {signum: signal.signal(signum, _raise_interrupt) for signum in STOP_SIGNALS}
    try:
        hub.start(database_url)
        report = hub.sync(database_url)
        print(render_banner(hub.url, hub.secrets.password, database_url, hub.log_path, report),
              flush=True)  # fmt: skip
        status = hub.wait()
        print(f"coursehub demo: the hub exited with status {status}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("coursehub demo: stopping the hub, its servers and services...", flush=True)
        return 0
    finally:
        for signum in STOP_SIGNALS:  # a second Ctrl-C does not cut the stop short
            signal.signal(signum, signal.SIG_IGN)
        hub.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        print("coursehub demo: stopped; data kept in " + str(data_dir), flush=True)
