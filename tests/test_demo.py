"""``coursehub demo`` as a subprocess: a real hub, proxy, seeded course, student servers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import requests

from coursehub.demo.seed import roster_bytes
from coursehub.demo.setup import find_proxy
from coursehub.errors import UsageError
from helpers import free_port, wait_until

pytestmark = pytest.mark.integration

STUDENT = "p2501001"
LEAD = "mbuffat"
FORMGRADER = "/services/mlmeca-2025/formgrader"
GUARD_ARG = "--ServerApp.jpserver_extensions=coursehub.grading.formgrader.guard=True"
START_TIMEOUT_S = 180.0


def _proxy_or_skip() -> None:
    try:
        find_proxy()
    except UsageError as exc:
        pytest.skip(str(exc))


class Demo:
    """One ``coursehub demo`` subprocess on a free port."""

    def __init__(self, data_dir: Path, sigint_ignored: bool = False) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.output = data_dir.parent / f"demo-{self.port}.out"
        self.stopped: list[psutil.Process] = []
        # `nohup make demo &`: a background job of a non-interactive shell ignores SIGINT
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "coursehub",
                    "demo",
                    "--port",
                    str(self.port),
                    "--data-dir",
                    str(data_dir),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=ignore,
            )
        self._wait_for_banner()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def _wait_for_banner(self) -> None:
        def banner() -> bool:
            if "coursehub demo is running" in self.text():
                return True
            assert self.process.poll() is None, "the demo exited"
            return False

        try:
            wait_until(banner, START_TIMEOUT_S, 0.3, what="the demo's banner")
        except AssertionError as exc:
            self.stop()
            pytest.fail(f"the demo did not start ({exc}):\n{self.text()[-3000:]}")

    def token(self) -> str:
        return json.loads((self.data_dir / "demo-secrets.json").read_text())["service_token"]

    def api(self, method: str, path: str) -> requests.Response:
        headers = {"Authorization": f"token {self.token()}"}
        return requests.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=30)

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def login(self, username: str) -> requests.Session:
        """Return a browser-like session signed in to the hub through its login form."""
        session = requests.Session()
        form = session.get(f"{self.url}/hub/login", timeout=10).text
        xsrf = re.search(r'name="_xsrf"[^>]*value="([^"]+)"', form)
        password = json.loads((self.data_dir / "demo-secrets.json").read_text())["password"]
        data = {"username": username, "password": password, "_xsrf": xsrf.group(1) if xsrf else ""}
        answer = session.post(f"{self.url}/hub/login", data=data, timeout=30)
        assert answer.status_code == 200 and session.cookies.get("jupyterhub-session-id")
        return session

    def leftovers(self) -> list[psutil.Process]:
        """Return the processes seen under the demo before it stopped that still run."""
        return [p for p in self.stopped if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    def stop(self, signum: int = signal.SIGINT) -> int:
        self.stopped = self.descendants()
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def get_formgrader(session: requests.Session, url: str) -> requests.Response:
    """GET the formgrader through the hub, waiting while its service is still starting."""
    answers: list[requests.Response] = []

    def started() -> bool:  # not the response itself: a 403 response is false
        answers.append(session.get(url + FORMGRADER, timeout=30))
        return answers[-1].status_code not in (502, 503)

    wait_until(started, START_TIMEOUT_S, 0.5, what="the formgrader's service")
    return answers[-1]


def wait_for_server(demo: Demo, username: str) -> psutil.Process:
    """Start ``username``'s server through the API; return its process once it is ready."""
    assert demo.api("POST", f"/users/{username}/server").status_code in (201, 202)

    def ready() -> bool:
        model = demo.api("GET", f"/users/{username}").json()
        return bool(model["servers"].get("", {}).get("ready"))

    wait_until(ready, START_TIMEOUT_S, 0.5, what=f"the server of {username}")
    for process in demo.descendants():
        try:
            if process.environ().get("JUPYTERHUB_USER") == username:
                return process
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    pytest.fail(f"no process of {username} among the demo's descendants")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _proxy_or_skip()
    return tmp_path_factory.mktemp("demo") / "data"


def test_roster_is_thirty_french_students_semicolon_separated():
    text = roster_bytes().decode("utf-8")
    lines = text.strip().splitlines()
    assert lines[0] == "N° étudiant;Nom;Prénom;Courriel;Groupe"
    assert len(lines) == 31
    assert any("é" in line or "ï" in line for line in lines[1:])


def test_demo_serves_login_and_student_server_runs_under_profile(demo_dir):
    demo = Demo(demo_dir)
    try:
        assert "DEMO ONLY" in demo.text()
        login = requests.get(f"{demo.url}/hub/login", timeout=10)
        assert login.status_code == 200 and 'name="password"' in login.text
        groups = demo.api("GET", f"/users/{STUDENT}").json()["groups"]
        assert "nbgrader-mlmeca-2025" in groups
        server = wait_for_server(demo, STUDENT)
        env = server.environ()
        assert env["OMP_NUM_THREADS"] == "2" and env["OPENBLAS_NUM_THREADS"] == "2"
        assert env["OMP_WAIT_POLICY"] == "PASSIVE"
        assert env["HOME"] == str(demo_dir / "homes" / STUDENT)
        assert (demo_dir / "homes" / STUDENT / "double_pendulum.ipynb").is_file()
        # the course's shared data folder is there from the first start
        assert (demo_dir / "homes" / STUDENT / "mlmeca-2025-data" / "README.md").is_file()
        # the demo assignment is released, and the server's nbgrader sees the exchange
        exchange = demo_dir / "nbgrader" / "exchange" / "mlmeca-2025"
        assert (exchange / "outbound" / "pendulum_energy" / "pendulum_energy.ipynb").is_file()
        config_path = env["JUPYTER_CONFIG_PATH"].split(os.pathsep)  # coursehub's tools first
        assert any((Path(p) / "nbgrader_config.py").is_file() for p in config_path), config_path
        if os.geteuid() == 0 and Path("/sys/fs/cgroup/cpu").is_dir():
            check_cgroup(server.pid, STUDENT, cpus=2, gib=4)
        # the lead's server runs under the course's team profile (4 CPUs, 8 GiB, 4 threads)
        lead_server = wait_for_server(demo, LEAD)
        assert lead_server.environ()["OMP_NUM_THREADS"] == "4"
        if os.geteuid() == 0 and Path("/sys/fs/cgroup/cpu").is_dir():
            check_cgroup(lead_server.pid, LEAD, cpus=4, gib=8)
        # the course page's formgrader link answers for the lead, not for a student
        formgrader = get_formgrader(demo.login(LEAD), demo.url)
        assert formgrader.status_code == 200, formgrader.text[-2000:]
        assert "nbgrader" in formgrader.text.lower() and "formgrader" in formgrader.url
        assert get_formgrader(demo.login(STUDENT), demo.url).status_code in (403, 404)
        # the course app signs users in through the hub's OAuth: the lead manages the
        # course, a student is refused its management pages
        check_course_app(demo)
    finally:
        status = demo.stop()
    assert status == 0
    assert demo.stopped and not demo.leftovers()
    assert "stopped; data kept" in demo.text()


def check_course_app(demo: Demo) -> None:
    """The lead reaches the course's edit page through HubOAuth; a student gets 403."""
    app = f"{demo.url}/services/coursehub"
    lead = demo.login(LEAD)
    page = lead.get(f"{app}/courses/mlmeca-2025/", timeout=30)
    assert page.status_code == 200 and "Machine Learning for Mechanics" in page.text
    assert "/hub/api/oauth2/authorize" in " ".join(r.url for r in page.history)
    assert lead.get(f"{app}/courses/mlmeca-2025/edit", timeout=30).status_code == 200
    student = demo.login(STUDENT)
    assert student.get(f"{app}/courses/mlmeca-2025/", timeout=30).status_code == 200
    assert student.get(f"{app}/courses/mlmeca-2025/edit", timeout=30).status_code == 403
    assert student.get(f"{app}/courses/mlmeca-2025/roster", timeout=30).status_code == 403
    # the printed administrator signs in with the shared password and administers
    admin = demo.login("admin")
    assert admin.get(f"{app}/admin/", timeout=30).status_code == 200
    assert lead.get(f"{app}/admin/", timeout=30).status_code == 403


def check_cgroup(pid: int, username: str, cpus: int, gib: int) -> None:
    """The server's v1 cgroup has a ``cpus``-CPU quota and a ``gib`` GiB memory limit."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    paths = {c: p for _, cs, p in (line.split(":", 2) for line in lines) for c in cs.split(",")}
    cpu_dir = Path("/sys/fs/cgroup/cpu") / paths["cpu"].lstrip("/")
    mem_dir = Path("/sys/fs/cgroup/memory") / paths["memory"].lstrip("/")
    assert cpu_dir.name == f"jupyter-{username}"
    assert (cpu_dir / "cpu.cfs_quota_us").read_text().strip() == str(cpus * 100000)
    assert (cpu_dir / "cpu.cfs_period_us").read_text().strip() == "100000"
    assert int((mem_dir / "memory.limit_in_bytes").read_text()) == gib * 1024**3


def test_restart_in_the_background_keeps_data_and_stops_on_sigterm(demo_dir):
    """Started as `nohup make demo &` (SIGINT ignored), SIGTERM stops it and all it started."""
    if not (demo_dir / "catalog.sqlite").exists():
        pytest.skip("needs the data left by the previous test")
    secrets_before = (demo_dir / "demo-secrets.json").read_text()
    demo = Demo(demo_dir, sigint_ignored=True)
    status = None
    try:
        assert "catalog kept" in demo.text()
        users = demo.api("GET", "/users").json()
        assert STUDENT in {u["name"] for u in users}
        assert (demo_dir / "jupyterhub.sqlite").exists()
        assert (demo_dir / "homes" / STUDENT).is_dir()
        wait_for_server(demo, STUDENT)
    finally:
        status = demo.stop(signal.SIGTERM)
    assert status == 0
    assert (demo_dir / "demo-secrets.json").read_text() == secrets_before
    assert len(demo.stopped) >= 3 and not demo.leftovers()  # proxy, app, culler, server...
    assert "did not stop" not in demo.text()  # the hub stopped on SIGTERM, not killed


def test_demo_config_runs_each_graded_courses_formgrader_as_a_service(tmp_path, monkeypatch):
    from traitlets.config import Config

    from coursehub.atomicfile import write_atomically
    from coursehub.demo.setup import grading_layouts, render_demo_config
    from coursehub.grading.layout import make_layout, render_course_config

    layout = make_layout("mlmeca-2025", tmp_path / "nbgrader" / "courses", tmp_path / "x")
    write_atomically(layout.config_path, render_course_config(layout))
    (tmp_path / "nbgrader" / "courses" / "numflu-2025").mkdir()  # not set up: no service
    monkeypatch.setenv("COURSEHUB_CHP", "/bin/true")
    for name, value in [
        ("COURSEHUB_DEMO_PASSWORD", "pw"),
        ("COURSEHUB_DEMO_SERVICE_TOKEN", "t"),
        ("FORMGRADER_TOKEN_MLMECA_2025", "fg"),
    ]:
        monkeypatch.setenv(name, value)
    layouts = grading_layouts(tmp_path)
    assert [fg.course_id for fg in layouts] == ["mlmeca-2025"]
    config = Config()
    exec(
        render_demo_config(tmp_path, 8000, "127.0.0.1", "sqlite://", 2, layouts),
        {"get_config": lambda: config},
    )
    services = {s["name"]: s for s in config.JupyterHub.services}
    # a terminal in a server finds `coursehub run` (the README's command) and python
    environment = config.Spawner.environment.get_value({})  # the updates, applied
    assert environment["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    assert environment["JUPYTER_CONFIG_PATH"] == str(tmp_path / "nbgrader" / "jupyter")
    assert services["mlmeca-2025"]["cwd"] == str(layout.course_dir)
    assert services["mlmeca-2025"]["command"][0] == sys.executable
    # the formgrader only: no kernels, terminals, contents or Lab (formgrader.guard)
    assert GUARD_ARG in services["mlmeca-2025"]["command"]
    assert services["coursehub"]["environment"]["COURSEHUB_FORMGRADER_COURSES"] == "mlmeca-2025"
    roles = {r["name"]: r for r in config.JupyterHub.load_roles}
    assert roles["formgrade-mlmeca-2025"]["scopes"] == [
        "access:services!service=mlmeca-2025",
        "list:services!service=mlmeca-2025",
        "read:services!service=mlmeca-2025",
    ]


def test_the_demo_renders_the_whole_jupyter_server_only_if_the_site_asks(tmp_path, monkeypatch):
    from coursehub.demo.setup import render_demo_config
    from coursehub.grading.layout import make_layout

    layout = make_layout("mlmeca-2025", tmp_path / "nbgrader" / "courses", tmp_path / "x")
    monkeypatch.setenv("COURSEHUB_CHP", "/bin/true")
    monkeypatch.setenv("COURSEHUB_FORMGRADER_FULL_SERVER", "1")
    text = render_demo_config(tmp_path, 8000, "127.0.0.1", "sqlite://", 2, [layout])
    assert "RefusingKernelManager" not in text and "coursehub_formgrader_full_server" in text
    monkeypatch.delenv("COURSEHUB_FORMGRADER_FULL_SERVER")
    assert GUARD_ARG in render_demo_config(tmp_path, 8000, "127.0.0.1", "sqlite://", 2, [layout])
