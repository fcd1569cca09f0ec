"""coursehub.grading: rendered configs (golden files), plans, bad input, gradebook sync, CLI."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from coursehub.cli import main
from coursehub.errors import CoursehubError, UsageError
from coursehub.grading.assignments import (
    add_assignment,
    generate_assignment,
    parse_submission_name,
    release_assignment,
)
from coursehub.grading.autograde.job import autograde_args
from coursehub.grading.autograde.plan import plan_autograde
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import plan_student_identity
from coursehub.grading.formgrader.service import (
    formgrader_link,
    formgrader_url,
    plan_service_model,
    register_formgrader,
    render_formgrader_config,
)
from coursehub.grading.gradebook import (
    StudentRecord,
    plan_gradebook_sync,
    read_gradebook,
    sync_gradebook,
)
from coursehub.grading.layout import (
    EXCHANGE_MODES,
    ensure_course,
    layout_from_env,
    make_layout,
    plan_exchange_dirs,
    render_course_config,
)
from coursehub.grading.studentconfig import render_student_config
from coursehub.hub.hubclient import HubError
from helpers import assert_matches_golden

FIXED = make_layout("mlmeca-2025", "/srv/nbgrader/courses", "/srv/nbgrader/exchange")


def load_config(text: str, tmp_path: Path, prefix: str = "") -> object:
    path = tmp_path / "config.py"
    path.write_text(prefix + text)
    return PyFileConfigLoader(path.name, path=str(tmp_path)).load_config()


@pytest.fixture
def layout(tmp_path):
    made = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(made)
    return made


def demo_notebook() -> Path:
    return demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"


# --- rendered configuration ---------------------------------------------------


def test_course_config_matches_golden_file_and_loads(tmp_path):
    text = render_course_config(FIXED)
    assert_matches_golden(text, "grading_course_config.py.golden")
    config = load_config(text, tmp_path)
    assert config.CourseDirectory.course_id == "mlmeca-2025"
    assert config.Exchange.path_includes_course is True
    # every autograde that reads it (the formgrader's button too) sandboxes the kernel
    executes = [pp.__name__ for pp in config.Autograde.autograde_preprocessors]
    assert "SandboxExecute" in executes and "Execute" not in executes


def test_every_html_export_of_a_course_sanitises_the_students_outputs(tmp_path):
    from nbconvert.exporters import HTMLExporter
    from nbgrader.converters import GenerateFeedback

    config = load_config(render_course_config(FIXED), tmp_path)
    # the formgrader's manual grading page and generate_feedback: nbconvert's SanitizeHTML
    assert config.HTMLExporter.preprocessors == ["coursehub.grading.studenthtml.SanitizeSubmission"]
    exporter = HTMLExporter(config=config)
    assert "SanitizeSubmission" in [type(pp).__name__ for pp in exporter._preprocessors]
    assert GenerateFeedback(config=config).exporter_class is HTMLExporter


def test_student_config_matches_golden_file_and_loads(tmp_path):
    text = render_student_config("/srv/nbgrader/exchange", timezone="Europe/Paris")
    assert_matches_golden(text, "grading_student_config.py.golden")
    config = load_config(text, tmp_path)
    assert config.ExchangeFactory.list == "coursehub.grading.studentlist.ZonedList"
    assert config.ExchangeList.timezone == "Europe/Paris"  # shown in; recorded in UTC:
    assert "timezone" not in config.Exchange and "timestamp_format" not in config.Exchange
    assert config.Authenticator.plugin_class.__name__ == "JupyterHubAuthPlugin"
    assert config.ExchangeFactory.fetch_assignment.endswith("RecordingFetchAssignment")


def test_single_user_student_config_names_submissions_after_the_hub_user(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "p2500001")
    config = load_config(render_student_config("/x", single_user=True), tmp_path)
    assert config.CourseDirectory.student_id == "p2500001"


def test_formgrader_config_matches_golden_and_gives_each_team_its_course(tmp_path, monkeypatch):
    layouts = [FIXED, make_layout("numflu-2025", "/srv/nbgrader/courses", "/srv/x")]
    text = render_formgrader_config(layouts)
    assert_matches_golden(text, "grading_formgrader_config.py.golden")
    monkeypatch.setenv("FORMGRADER_TOKEN_MLMECA_2025", "t1")
    monkeypatch.setenv("FORMGRADER_TOKEN_NUMFLU_2025", "t2")
    base = "c.JupyterHub.services = []\nc.JupyterHub.load_roles = []\n"
    hub = load_config(text, tmp_path, prefix=base).JupyterHub
    services = {s["name"]: s for s in hub.services}
    assert services["mlmeca-2025"]["cwd"] == "/srv/nbgrader/courses/mlmeca-2025"
    assert services["numflu-2025"]["api_token"] == "t2"
    roles = {r["name"]: r for r in hub.load_roles}
    assert roles["formgrade-numflu-2025"]["groups"] == ["formgrade-numflu-2025"]
    assert roles["formgrade-numflu-2025"]["scopes"] == [
        "access:services!service=numflu-2025",
        "list:services!service=numflu-2025",
        "read:services!service=numflu-2025",
    ]


def test_formgrader_opens_under_the_course_service():
    assert formgrader_url("mlmeca-2025", "/") == "/services/mlmeca-2025/formgrader"


@pytest.mark.parametrize(
    "listed, expected",
    [
        (None, None),
        ("", None),
        ("numflu-2025", None),
        ("numflu-2025, mlmeca-2025", "/services/mlmeca-2025/formgrader"),
        ("*", "/services/mlmeca-2025/formgrader"),
    ],
)
def test_formgrader_link_only_for_courses_whose_service_is_configured(listed, expected):
    env = {} if listed is None else {"COURSEHUB_FORMGRADER_COURSES": listed}
    assert formgrader_link("mlmeca-2025", env) == expected


def test_formgrader_config_with_chosen_python_ports_and_root(tmp_path, monkeypatch):
    text = render_formgrader_config(
        [FIXED], python="/venv/bin/python", ports=[41234], allow_root=True
    )
    monkeypatch.setenv("FORMGRADER_TOKEN_MLMECA_2025", "t1")
    base = "c.JupyterHub.services = []\nc.JupyterHub.load_roles = []\n"
    (service,) = load_config(text, tmp_path, prefix=base).JupyterHub.services
    assert service["url"] == "http://127.0.0.1:41234"
    assert service["command"][0] == "/venv/bin/python" and service["command"][-1] == "--allow-root"
    with pytest.raises(ValueError, match="1 courses but 2 ports"):
        render_formgrader_config([FIXED], ports=[1, 2])


class FakeHub:
    def __init__(self, status: int | None = None) -> None:
        self.status, self.created = status, {}

    def create_service(self, name, model):
        if self.status:
            raise HubError(self.status, "nope", "POST", f"/services/{name}")
        self.created[name] = model
        return model


def test_register_formgrader_at_run_time_with_a_fresh_token():
    hub = FakeHub()
    done = register_formgrader(hub, "mlmeca-2025", "http://127.0.0.1:9900")
    assert done.registered and len(done.api_token) == 64
    assert hub.created["mlmeca-2025"] == plan_service_model(
        "mlmeca-2025", "http://127.0.0.1:9900", done.api_token
    )
    assert hub.created["mlmeca-2025"]["info"]["display_name"] == "Grading: mlmeca-2025"


def test_a_formgrader_registered_with_its_title_shows_the_title_in_the_services_menu():
    hub = FakeHub()
    register_formgrader(
        hub, "mlmeca-2025", "http://127.0.0.1:9900", "Machine Learning for Mechanics"
    )
    info = hub.created["mlmeca-2025"]["info"]
    assert info["display_name"] == "Grading: Machine Learning for Mechanics"
    assert info["course_id"] == "mlmeca-2025"


@pytest.mark.parametrize("status", [403, 404, 405])
def test_register_formgrader_says_restart_when_the_hub_refuses(status):
    done = register_formgrader(FakeHub(status), "mlmeca-2025", "http://127.0.0.1:9900")
    assert not done.registered
    assert "restart the hub" in done.message and "mlmeca-2025" in done.message


# --- exchange permissions -------------------------------------------------------


def test_exchange_plan_lists_parents_first_with_nbgrader_modes():
    plan = plan_exchange_dirs(Path("/x"), "c1")
    assert plan[0] == (Path("/x"), 0o1777)
    assert dict(plan)[Path("/x/c1/inbound")] == 0o3733
    paths = [p for p, _ in plan]
    assert all(paths.index(p.parent) < i for i, p in enumerate(paths) if p.parent in paths)


def test_ensure_course_creates_directories_with_their_modes(layout):
    for directory, mode in plan_exchange_dirs(layout.exchange_root, layout.course_id):
        assert stat.S_IMODE(directory.stat().st_mode) == mode, directory
    assert layout.config_path.read_text() == render_course_config(layout)
    assert (layout.course_dir / "gradebook.db").is_file()
    assert set(EXCHANGE_MODES) >= {"", "{course_id}/inbound"}
    ensure_course(layout)  # idempotent


def test_layout_from_env_rejects_a_bad_timeout():
    with pytest.raises(UsageError, match="EXECUTE_TIMEOUT"):
        layout_from_env("c1", {"COURSEHUB_GRADING_EXECUTE_TIMEOUT": "soon"})


@pytest.mark.parametrize("name", ["", "../etc", "a+b", "a b", ".hidden"])
def test_unsafe_course_ids_are_refused(name):
    with pytest.raises(UsageError, match="course id"):
        make_layout(name)


# --- plans ------------------------------------------------------------------


def test_gradebook_plan_adds_updates_removes_and_keeps_graded_students():
    roster = [StudentRecord("ana", "Ana", "Lefèvre"), StudentRecord("bob", "Bob", "New")]
    present = [StudentRecord("bob", "Bob", "Old"), StudentRecord("cy"), StudentRecord("dee")]
    plan = plan_gradebook_sync(roster, present, with_submissions={"dee"})
    assert [s.student_id for s in plan.additions] == ["ana"]
    assert plan.updates == (StudentRecord("bob", "Bob", "New"),)
    assert plan.removals == ("cy",)
    assert plan.kept == ("dee",)
    assert plan_gradebook_sync(roster, roster).empty


def test_autograde_plan_sets_strangers_apart():
    plan = plan_autograde({"ana", "eve", "bob"}, ["bob", "ana", "cy"])
    assert plan.students == ("ana", "bob")
    assert plan.not_on_roster == ("eve",)


def test_autograde_command_sets_the_cell_timeout_and_the_student(layout):
    args = autograde_args(layout, "ps1", "ana")
    assert args[:2] == ["autograde", "ps1"]
    assert "--student=ana" in args and "--Execute.timeout=30" in args
    assert "--Autograde.create_student=False" in args


def test_submission_names_parse_with_and_without_random_suffix():
    assert parse_submission_name("ana+ps1+2025-01-01 10:00:00.0 UTC+AbCd") == ("ana", "ps1")
    assert parse_submission_name("ana+ps1+2025-01-01 10:00:00.0 UTC") == ("ana", "ps1")
    assert parse_submission_name("a+b+ps1+2025-01-01 10:00:00.0 UTC+AbCd") is None
    assert parse_submission_name("junk") is None


# --- bad input ----------------------------------------------------------------


def test_notebook_without_nbgrader_cells_is_refused_by_name(layout, tmp_path):
    plain = tmp_path / "plain.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), plain)
    with pytest.raises(UsageError, match=r"assignment ps1: plain.ipynb has no nbgrader cells"):
        add_assignment(layout, "ps1", [plain])
    assert not (layout.course_dir / "source" / "ps1").exists()


def test_unreadable_source_notebook_is_refused(layout, tmp_path):
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    with pytest.raises(UsageError, match=r"assignment ps1: .*broken\.ipynb is not a notebook"):
        add_assignment(layout, "ps1", [broken])


def test_duplicate_assignment_name_is_refused(layout):
    add_assignment(layout, "ps1", [demo_notebook()])
    with pytest.raises(UsageError, match="assignment ps1 already exists in course phys-2025"):
        add_assignment(layout, "ps1", [demo_notebook()])


def test_release_before_generate_is_refused(layout):
    add_assignment(layout, "ps1", [demo_notebook()])
    with pytest.raises(UsageError, match="ps1 of course phys-2025 is not generated yet"):
        release_assignment(layout, "ps1")
    with pytest.raises(UsageError, match="assignment ps2 not found in course phys-2025"):
        generate_assignment(layout, "ps2")


def test_generate_and_release_make_the_student_version(layout):
    add_assignment(layout, "ps1", [demo_notebook()])
    generate_assignment(layout, "ps1")
    release_assignment(layout, "ps1")
    released = layout.exchange_root / "phys-2025" / "outbound" / "ps1" / demo_notebook().name
    text = released.read_text()
    assert "raise NotImplementedError()" in text and "BEGIN SOLUTION" not in text
    assert "-39.347" not in text  # hidden tests stay hidden
    with pytest.raises(UsageError, match="already released"):
        release_assignment(layout, "ps1")


def test_demo_notebook_has_autograder_tests_worth_four_points():
    cells = nbformat.read(demo_notebook(), as_version=4).cells
    points = [c.metadata["nbgrader"].get("points", 0) for c in cells if "nbgrader" in c.metadata]
    assert sum(points) == 4
    assert any(c.metadata["nbgrader"].get("solution") for c in cells if "nbgrader" in c.metadata)


# --- gradebook follows the catalog -----------------------------------------------------


def test_gradebook_follows_roster_changes(session, layout):
    from coursehub.catalog.members import add_member, remove_member
    from coursehub.catalog.people import get_person
    from coursehub.catalog.seed import seed_demo

    course = seed_demo(session)
    first = sync_gradebook(session, course, layout)
    assert {s.student_id for s in first.additions} == {
        "p2500001",
        "p2500002",
        "p2500003",
        "p2500004",
    }
    remove_member(session, course, "p2500004")
    add_member(session, course, "p2500009", "student", first_name="Zoé", last_name="Roy")
    get_person(session, "p2500001").last_name = "Renamed"
    session.flush()
    second = sync_gradebook(session, course, layout)
    assert [s.student_id for s in second.additions] == ["p2500009"]
    assert second.removals == ("p2500004",)
    students, _ = read_gradebook(layout)
    names = {s.student_id: s.last_name for s in students}
    assert set(names) == {"p2500001", "p2500002", "p2500003", "p2500009"}
    assert names["p2500001"] == "Renamed"
    assert [s.student_id for s in second.updates] == ["p2500001"]
    assert sync_gradebook(session, course, layout).empty


# --- command line -------------------------------------------------------------------


def test_cli_reports_a_bad_step_as_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    assert main(["grading", "release", "phys-2025", "ps1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coursehub: error: assignment ps1 of course phys-2025 is not generated")
    assert "Traceback" not in err


def test_cli_prints_the_hub_config(tmp_path, monkeypatch, capsys):
    import os
    import subprocess

    from coursehub.contract import hub_id_of_data_dir

    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    account = f"fg-{hub_id_of_data_dir(str(tmp_path / 'hub'))}-mlmeca-2025"
    try:
        argv = ["grading", "hub-config", "mlmeca-2025", "--hub-data-dir", str(tmp_path / "hub")]
        assert main(argv) == 0
        out = capsys.readouterr().out
    finally:
        subprocess.run(["userdel", account], check=False, capture_output=True)
        subprocess.run(["groupdel", account], check=False, capture_output=True)
    assert "access:services!service=mlmeca-2025" in out
    if os.geteuid() == 0:  # as root, the formgrader runs as the course's account of this hub
        assert f"'USER': '{account}'" in out


def test_cli_module_imports_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys, coursehub.cli as c; c.build_parser(); "
        "heavy = ('nbgrader', 'sqlalchemy', 'traitlets'); "
        "print(json.dumps([m for m in heavy if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    )
    assert json.loads(out.stdout) == []


def test_failed_nbgrader_step_becomes_a_coursehub_error(layout):
    from coursehub.grading.assignments import _check

    with pytest.raises(
        CoursehubError, match="could not collect assignment ps1 of course phys-2025"
    ):
        _check(
            {"success": False, "error": "Traceback...\nExchangeError: boom"},
            "collect",
            layout,
            "ps1",
        )


@pytest.fixture
def answering_url():
    """URL of a local HTTP server answering 200 (the hub polls a new service's URL)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.integration
def test_register_formgrader_on_a_real_hub(live_hub, answering_url):
    from coursehub.hub.hubclient import HubClient

    with HubClient(live_hub.api_url, live_hub.admin_token) as admin:
        try:
            done = register_formgrader(admin, "fg-test-2025", answering_url)
            assert done.registered and done.api_token
            assert "fg-test-2025" in {s["name"] for s in admin.list_services()}
            again = register_formgrader(admin, "fg-test-2025", answering_url)
            assert again.registered and "already registered" in again.message
        finally:
            admin.delete_service("fg-test-2025")
    with HubClient(live_hub.api_url, live_hub.token) as sync_only:  # no admin:services
        refused = register_formgrader(sync_only, "fg-test-2025", answering_url)
    assert not refused.registered and "restart the hub" in refused.message


# --- who a student is, and where their files go ----------------------------------------


@pytest.mark.parametrize(
    ("requested", "hub_user", "os_user", "is_root", "expected"),
    [
        (None, "p1", "root", True, "p1"),  # demo: every server is root, the hub names the user
        ("p1", "p1", "root", True, "p1"),
        (None, None, "p2", False, "p2"),
        ("p2", None, "p2", False, "p2"),
        ("p2", None, "root", True, "p2"),  # an administrator outside the hub
        ("p2", "p1", "root", True, None),  # root inside p1's server: still p1
        ("p2", "p1", "p1", False, None),
        ("p2", None, "p1", False, None),
    ],
)
def test_a_student_fetches_and_submits_only_as_themselves(
    requested, hub_user, os_user, is_root, expected
):
    if expected is None:
        with pytest.raises(UsageError, match=f"--student {requested}: you are"):
            plan_student_identity(requested, hub_user, os_user, is_root)
    else:
        assert plan_student_identity(requested, hub_user, os_user, is_root) == expected


@pytest.mark.parametrize("requested", [None, "p2", "p1"])
def test_a_student_with_a_unix_account_cannot_become_another_by_setting_jupyterhub_user(
    requested,
):
    # p1's own terminal: JUPYTERHUB_USER=p2 coursehub grading submit ... (p2 is a Unix account)
    with pytest.raises(UsageError, match="JUPYTERHUB_USER=p2 but you are Unix user p1"):
        plan_student_identity(requested, "p2", "p1", False, hub_user_has_account=True)


def test_servers_sharing_one_unix_account_are_told_apart_by_the_hub_user():
    # containers (every pod is jovyan): hub users have no Unix account here
    assert plan_student_identity(None, "p2", "jovyan", False, hub_user_has_account=False) == "p2"
    assert plan_student_identity(None, "p2", "root", True, hub_user_has_account=True) == "p2"


@pytest.fixture
def released(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    made = layout_from_env("phys-2025")
    ensure_course(made)
    add_assignment(made, "ps1", [demo_notebook()])
    generate_assignment(made, "ps1")
    release_assignment(made, "ps1")
    return made


def test_submit_as_another_hub_user_is_refused_with_a_clear_message(released, monkeypatch, capsys):
    monkeypatch.setenv("JUPYTERHUB_USER", "p2501002")
    assert main(["grading", "submit", "phys-2025", "ps1", "--student", "p2501001"]) == 2
    err = capsys.readouterr().err
    assert "--student p2501001: you are hub user p2501002" in err
    assert not list((released.exchange_root / "phys-2025" / "inbound").iterdir())


@pytest.mark.parametrize("given", ["mywork", "./a/../mywork", "{tmp}/mywork", "~/mywork"])
def test_fetch_and_submit_dir_is_resolved_once(released, tmp_path, monkeypatch, capsys, given):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    home = tmp_path / "home"
    expected = (home if given.startswith("~") else work) / "mywork" / "phys-2025" / "ps1"
    if given.startswith("{tmp}"):
        expected = tmp_path / "mywork" / "phys-2025" / "ps1"
    given = given.format(tmp=tmp_path)
    (work / "a").mkdir()
    monkeypatch.setenv("JUPYTERHUB_USER", "p2501001")
    assert main(["grading", "fetch", "phys-2025", "ps1", "--dir", given]) == 0
    first, due = capsys.readouterr().out.strip().splitlines()
    assert due == "due no due date; no penalty"
    printed = first.removeprefix("fetched into ")
    assert Path(printed).resolve() == expected.resolve()
    assert (expected / f"{DEMO_ASSIGNMENT}.ipynb").is_file()
    assert main(["grading", "submit", "phys-2025", "ps1", "--dir", given]) == 0
    assert "as p2501001" in capsys.readouterr().out
