"""Run the whole system on one machine: ``coursehub demo``.

Layout of the data directory (kept across restarts; nothing is re-seeded):

``demo.lock``                 held (``flock``) while a demo runs here (:mod:`.lock`)
``catalog.sqlite``             the course catalog (migrated, seeded once)
``demo-secrets.json``          the demo password and the course app's hub token
``jupyterhub.sqlite``          the hub's database (and its cookie secret next to it)
``hub/jupyterhub_config.py``   rendered at each start (:mod:`coursehub.hub.render`)
``hub/jupyterhub.log``         the hub's, proxy's and services' output
``nbgrader/courses/{course_id}`` a course set up for grading; its formgrader runs
                               as the hub service ``{course_id}``
``homes/{username}``           each user's home (the pendulum notebook is copied
                               there on first spawn)

The directory is 0700 and its files 0600 (:mod:`coursehub.demo.files`).

Start-up: lock the data directory (a second demo there is refused), check
that every port is free (:mod:`.ports`), migrate and seed the catalog,
render the hub configuration, start
``python -m jupyterhub`` (which starts configurable-http-proxy and the course
app at ``/services/coursehub/``), wait for its API, sync the catalog into hub
users and groups, print the URL and the accounts.

Stop: Ctrl-C, SIGTERM or SIGHUP, even when started in the background
(``nohup make demo &``, where SIGINT is ignored: explicit handlers replace
that). The hub starts with default signal dispositions and is stopped with
SIGTERM (it stops its servers, services and proxy); after
:data:`HUB_STOP_TIMEOUT_S`, its process group and any descendant left
(servers run in their own sessions) are killed.

Hub death: when the hub exits by itself (even killed by SIGKILL), the demo
stops every process it left (proxy, services, servers; see
:mod:`.processes`), prints why with the end of the hub log, and exits 1.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from coursehub.catalog.connect import open_catalog
from coursehub.catalog.db import session_scope
from coursehub.contract import hub_id_of_data_dir
from coursehub.demo.files import DEMO_UMASK, ensure_course_data, ensure_private_data
from coursehub.demo.lock import DemoLock, acquire_lock
from coursehub.demo.ports import check_ports, pick_ports
from coursehub.demo.processes import (
    WATCH_INTERVAL_S,
    become_subreaper,
    descendants,
    describe_status,
    die_with_parent,
    proxy_of_pid_file,
    reap_orphans,
    remove_stale_pid_files,
    stop_processes,
)
from coursehub.demo.setup import (
    demo_exam_environment,
    demo_spawn_limit,
    formgrader_names,
    grading_layouts,
    load_secrets,
    prepare_catalog,
    render_demo_config,
)
from coursehub.demo.slurm import cancel_leftover_jobs, check_slurm
from coursehub.errors import CoursehubError
from coursehub.grading.formgrader.account import prepare_formgraders
from coursehub.hub.background import sync_in_background
from coursehub.hub.hubclient import HubClient
from coursehub.hub.process import HubStartError, start_hub, wait_until_up
from coursehub.hub.sync import SyncOutcome, sync_catalog

HUB_START_TIMEOUT_S = 90.0
#: Seconds the hub gets to stop its servers, services and proxy after SIGTERM.
HUB_STOP_TIMEOUT_S = 30.0
#: Seconds a process left after the hub gets between SIGTERM and SIGKILL.
LEFTOVER_STOP_TIMEOUT_S = 5.0
#: Signals that stop the demo.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


__all__ = [
    "DemoHub",
    "run_demo",
]
#: Lines of the hub log shown when the hub fails.
LOG_TAIL_LINES = 25


class DemoHub:
    """The hub subprocess of the demo: start, wait until it answers, sync, stop.

    ``spawn_limit`` is its ``concurrent_spawn_limit``; None: ``$COURSEHUB_SPAWN_LIMIT``,
    else :func:`demo_spawn_limit` of this machine. The hub inherits ``lock``'s
    descriptor, so the data directory stays locked until the hub is gone too.
    ``exam_servers``: a start during a student's running exam is an exam server
    (:func:`coursehub.demo.setup.demo_exam_environment`; homes under ``exams/``).
    """

    def __init__(
        self,
        data_dir: Path,
        port: int,
        ip: str,
        spawn_limit: int | None = None,
        lock: DemoLock | None = None,
        spawner: str = "local",
        exam_servers: bool = False,
    ) -> None:
        self.data_dir, self.port, self.ip, self.lock = data_dir, port, ip, lock
        self.spawner, self.exam_servers = spawner, exam_servers
        self.spawn_limit = spawn_limit or demo_spawn_limit(os.environ.get("COURSEHUB_SPAWN_LIMIT"))
        self.hub_dir = data_dir / "hub"
        self.process: subprocess.Popen[bytes] | None = None
        self.secrets = load_secrets(data_dir)
        #: pid -> psutil.Process of the hub's descendants seen while it ran
        self.seen: dict[int, Any] = {}

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
        coursehub.demo.ports.PortInUseError
            Before anything starts, if one of the demo's ports is taken.
        CoursehubError
            If the hub exits or does not answer within the timeout (with the log's end).
        """
        self.hub_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        from coursehub.grading.formgrader.service import token_variable

        config = self.hub_dir / "jupyterhub_config.py"
        formgraders = grading_layouts(self.data_dir)
        ports = pick_ports(self.ip, self.port, len(formgraders))
        check_ports(ports.listening())
        names = formgrader_names(database_url, [fg.course_id for fg in formgraders])
        accounts = prepare_formgraders(formgraders, hub_id_of_data_dir(str(self.data_dir)))
        text = render_demo_config(
            self.data_dir,
            self.port,
            self.ip,
            database_url,
            self.spawn_limit,
            formgraders,
            ports,
            names,
            kind=self.spawner,
            accounts=accounts,
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
        if self.exam_servers:
            env.update(demo_exam_environment(self.data_dir, ports.service))
        with self.log_path.open("ab") as log:
            self.process = start_hub(
                config,
                self.hub_dir,
                env,
                log,
                preexec_fn=_hub_preexec,
                pass_fds=(self.lock.fileno(),) if self.lock else (),
            )
        self._wait_up()

    def _wait_up(self) -> None:
        try:
            wait_until_up(self.url, HUB_START_TIMEOUT_S, self.process)
        except HubStartError as exc:
            if exc.returncode is not None:
                raise CoursehubError(
                    f"the hub exited ({describe_status(exc.returncode)}) before "
                    f"answering; the end of {self.log_path}:\n{self.tail()}"
                ) from None
            self.stop()
            raise CoursehubError(
                f"the hub did not answer within {HUB_START_TIMEOUT_S:g} s; the end of "
                f"{self.log_path}:\n{self.tail()}"
            ) from None

    def tail(self, n_lines: int = LOG_TAIL_LINES) -> str:
        """Return the last ``n_lines`` of the hub log (indented), or "" when unreadable."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 64 * 1024))
                lines = log.read().decode(errors="replace").splitlines()[-n_lines:]
        except OSError:
            return ""
        return "\n".join("  " + line for line in lines)

    def sync(self, database_url: str) -> SyncOutcome:
        """Sync the catalog into the hub (users, course groups, profiles); return the outcome.

        One :func:`coursehub.hub.sync.sync_catalog`: each synced course
        records the time and status (``last_sync_at``, ``last_sync_status``)
        that its page shows; a hub that cannot be read is an outcome too.
        """
        with (
            open_catalog(database_url) as engine,
            HubClient(f"{self.url}/hub/api", self.secrets.service_token) as client,
            session_scope(engine) as session,
        ):
            return sync_catalog(session, client)

    def stop(self) -> None:
        """Stop the hub (SIGTERM, then SIGKILL after the grace), then whatever it left.

        Left processes are the hub's descendants seen while it ran
        (:attr:`seen`) or now, this process's adopted orphans (it is a
        subreaper, :func:`coursehub.demo.processes.become_subreaper`) and the
        proxy of ``proxy.pid``: SIGTERM, then SIGKILL. Pid files naming no
        process are removed.
        """
        process, self.process = self.process, None
        if process is None:
            return
        left = [*self.seen.values(), *descendants(process.pid)]
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(HUB_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                print(
                    f"coursehub demo: the hub did not stop within {HUB_STOP_TIMEOUT_S:g} s "
                    "of SIGTERM; killed",
                    file=sys.stderr,
                    flush=True,
                )
                process.kill()
                process.wait()
        _kill_group(process.pid, signal.SIGTERM)
        left += [*descendants(os.getpid()), *proxy_of_pid_file(self.data_dir / "proxy.pid")]
        stop_processes(left, LEFTOVER_STOP_TIMEOUT_S)
        _kill_group(process.pid, signal.SIGKILL)
        if self.spawner == "slurm":  # jobs are not the hub's processes: cancel what it left
            cancel_leftover_jobs(self.data_dir / "jupyterhub.sqlite")
        remove_stale_pid_files([self.data_dir / "proxy.pid", self.data_dir / "jupyterhub.pid"])

    def wait(self) -> int:
        """Block until the hub exits; return its status. Its descendants are noted meanwhile,
        and adopted orphans that ended are reaped
        (:func:`coursehub.demo.processes.reap_orphans`)."""
        assert self.process is not None
        while True:
            for child in descendants(self.process.pid):
                self.seen.setdefault(child.pid, child)
            reap_orphans(keep={self.process.pid})
            try:
                return self.process.wait(WATCH_INTERVAL_S)
            except subprocess.TimeoutExpired:
                continue


def _hub_preexec() -> None:
    """In the hub's child process: default signal dispositions, SIGTERM when the demo dies.

    A background job of a non-interactive shell starts with SIGINT ignored,
    and an ignored signal stays ignored across ``exec``.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    die_with_parent(signal.SIGTERM)


def _kill_group(pgid: int, signum: int) -> None:
    """Send ``signum`` to the process group ``pgid`` if any of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_demo(
    data_dir: Path,
    port: int,
    ip: str = "127.0.0.1",
    spawner: str = "local",
    exam_servers: bool = False,
) -> int:
    """Run the demo until Ctrl-C; return the exit status (0 after a clean stop, 1 if the hub died).

    ``spawner`` is ``local`` (servers are processes here) or ``slurm``
    (servers are jobs of this host's Slurm cluster; checked first).
    ``exam_servers``: a start during a student's running exam is an exam server.

    Raises
    ------
    coursehub.demo.slurm.SlurmUnavailableError
        At once, with ``spawner="slurm"``, if no Slurm cluster answers here.
    coursehub.demo.lock.DemoAlreadyRunningError
        At once, if another demo runs on ``data_dir`` (nothing is touched).
    coursehub.demo.ports.PortInUseError
        Before the hub starts, if one of its ports is taken.
    CoursehubError
        If the hub exits or does not answer while starting.
    """
    data_dir = data_dir.expanduser().resolve()
    if spawner == "slurm":  # before anything is written
        print(f"coursehub demo: servers run as Slurm jobs ({check_slurm()})", flush=True)
    previous_umask = os.umask(DEMO_UMASK)
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = acquire_lock(data_dir, port)
        try:
            return _run_locked(data_dir, port, ip, lock, spawner, exam_servers)
        finally:
            lock.release()
    finally:
        os.umask(previous_umask)


def _run_locked(
    data_dir: Path, port: int, ip: str, lock: DemoLock, spawner: str, exam_servers: bool
) -> int:
    from coursehub.demo.accounts import render_banner

    ensure_private_data(data_dir)
    # a proxy left by a demo of an older version, killed here: the lock says no demo runs
    stop_processes(proxy_of_pid_file(data_dir / "proxy.pid"), LEFTOVER_STOP_TIMEOUT_S)
    check_ports([("public URL (--port)", ip, port)])  # before seeding: fail fast
    database_url, seeded = prepare_catalog(data_dir)
    ensure_private_data(data_dir)
    from coursehub.grading.layout import secure_course

    layouts = grading_layouts(data_dir)
    for layout in layouts:  # an older version's course modes
        secure_course(layout)
    ensure_course_data(data_dir / "shared", [layout.course_id for layout in layouts])
    print(f"coursehub demo: catalog {'seeded' if seeded else 'kept'} in {data_dir}", flush=True)
    become_subreaper()
    hub = DemoHub(data_dir, port, ip, lock=lock, spawner=spawner, exam_servers=exam_servers)
    previous = {signum: signal.signal(signum, _raise_interrupt) for signum in STOP_SIGNALS}
    try:
        hub.start(database_url)
        report = sync_in_background(lambda: hub.sync(database_url), data_dir / "hub-sync.json")
        print(
            render_banner(hub.url, hub.secrets.password, database_url, hub.log_path, report),
            flush=True,
        )
        status = hub.wait()
        print(
            f"coursehub demo: the hub exited unexpectedly ({describe_status(status)}); "
            f"stopping the proxy, services and servers it left. The end of {hub.log_path}:\n"
            f"{hub.tail()}",
            file=sys.stderr,
            flush=True,
        )
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
