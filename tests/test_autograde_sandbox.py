"""Autograding runs students' code with nothing to steal: environment, files, network, processes.

The hostile submission's answer cell looks for the hub token and the catalog
URL (its own environment and every ``/proc/*/environ``), opens the gradebook,
another student's submission and the course's source, and connects to a port
on 127.0.0.1; it prints what it got into its own output, which nbgrader keeps
in the autograded notebook. The course is made world-readable on purpose so
that only the sandbox stands between the student's code and those files.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import tempfile
import textwrap
from pathlib import Path

import nbformat
import pytest

from coursehub.grading.assignments import collect
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.gradebook import ensure_students
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.demo import DEMO_ASSIGNMENT
from coursehub.resources.processes import pid_running
from coursehub.sandbox.account import SandboxAccount
from coursehub.sandbox.command import SandboxPlan, plan_sandbox_command, sandbox_mode
from coursehub.sandbox.env import plan_launch_env, plan_sandbox_env
from coursehub.sandbox.workdir import ROOT_WORK_DIR
from test_grading_e2e import CORRECT, PS, answer, backend, new_course

SECRET_ENV = {
    "JUPYTERHUB_API_TOKEN": "hub-token",
    "JPY_API_TOKEN": "old-hub-token",
    "JUPYTER_TOKEN": "server-token",
    "GITHUB_TOKEN": "gh",
    "COURSEHUB_DATABASE_URL": "postgresql://coursehub:pw@db/coursehub",
    "COURSEHUB_SECRET_KEY": "flask-key",
    "PGPASSWORD": "pw",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "AWS_ACCESS_KEY_ID": "aws-id",
    "JUPYTERHUB_COOKIE_SECRET": "cookie",
    "CONFIGPROXY_AUTH_TOKEN": "proxy",
    "LC_SECRET_TOKEN": "a secret in an allowed family",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent",
    "JUPYTERHUB_USER": "sleclerc",
    "COURSEHUB_GRADING_SECRET": "still a secret",
}
PLAIN_ENV = {
    "PATH": "/usr/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_NUM_THREADS": "2",
    "COURSEHUB_GRADING_COURSES": "/srv/nbgrader/courses",
    "PYTHONPATH": "/opt/lib",
}


@pytest.mark.parametrize("name", sorted(SECRET_ENV))
def test_the_autograde_environment_leaves_out(name):
    assert name not in plan_sandbox_env({**PLAIN_ENV, **SECRET_ENV})


@pytest.mark.parametrize("name", sorted(PLAIN_ENV))
def test_the_autograde_environment_keeps(name):
    assert plan_sandbox_env({**PLAIN_ENV, **SECRET_ENV})[name] == PLAIN_ENV[name]


def test_the_course_apps_autograde_process_gets_the_catalog_but_no_token():
    env = plan_launch_env({**PLAIN_ENV, **SECRET_ENV})
    assert env["COURSEHUB_DATABASE_URL"] == SECRET_ENV["COURSEHUB_DATABASE_URL"]
    assert not {"JUPYTERHUB_API_TOKEN", "COURSEHUB_SECRET_KEY", "PGPASSWORD"} & set(env)


def test_the_course_apps_autograde_process_gets_the_runner_backend_and_slurm_cluster():
    runner = {"COURSEHUB_RUNNER_BACKEND": "slurm", "SLURM_CONF": "/run/slurm/slurm.conf"}
    env = plan_launch_env({**PLAIN_ENV, **SECRET_ENV, **runner})
    assert {name: env[name] for name in runner} == runner
    assert "SLURM_CONF" not in plan_sandbox_env({**PLAIN_ENV, **runner})  # not for nbgrader


def test_as_root_the_kernel_runs_as_the_grader_without_network_or_capabilities():
    cmd = plan_sandbox_command(
        ["python", "-m", "ipykernel_launcher"],
        SandboxPlan("root", SandboxAccount("g", 999, 998), hidden=("/srv/courses",)),
    )
    assert cmd[cmd.index("unshare") + 1 :][:3] == ["--net", "--mount", "--pid"]
    assert {"--reuid=999", "--regid=998", "--clear-groups", "--no-new-privs"} <= set(cmd)
    assert cmd[-4:] == ["--", "python", "-m", "ipykernel_launcher"]
    assert "/srv/courses" in cmd


def test_without_namespaces_the_kernel_command_is_unchanged_or_only_drops_privileges():
    assert plan_sandbox_command(["k"], SandboxPlan("none")) == ["k"]
    uid_only = plan_sandbox_command(["k"], SandboxPlan("uid", SandboxAccount("g", 5, 6)))
    assert "unshare" not in uid_only and "--reuid=5" in uid_only
    with pytest.raises(ValueError, match="root mode needs the sandbox account"):
        plan_sandbox_command(["k"], SandboxPlan("root"))


HOSTILE = """\
import glob, json, os, socket
found = {{"env": sorted(k for k in os.environ
                       if any(w in k for w in ("TOKEN", "DATABASE", "SECRET")))}}
found["proc"] = []
for path in glob.glob("/proc/*/environ"):
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    if b"hub-token" in data or b"COURSEHUB_DATABASE_URL" in data:
        found["proc"].append(path)
found["readable"], found["writable"] = [], []
for path in {targets!r}:
    try:
        open(path, "rb").read(1)
        found["readable"].append(path)
    except OSError:
        pass
    if os.access(path, os.W_OK):
        found["writable"].append(path)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    found["net"] = True
except OSError:
    found["net"] = False
print("FOUND" + json.dumps(found, sort_keys=True))
"""


@pytest.fixture
def grader(sandbox_user):
    """The test's own sandbox account's name (:func:`conftest.sandbox_user`)."""
    return sandbox_user


@pytest.fixture
def open_course_root():
    """A world-readable folder for the course, as an old installation left it."""
    root = Path(tempfile.mkdtemp(prefix="chtest-course-"))
    root.chmod(0o755)
    yield root
    subprocess.run(["rm", "-rf", str(root)])


@pytest.mark.slow
@pytest.mark.root
def test_a_hostile_submission_gets_nothing_while_the_honest_ones_are_graded(
    grader, open_course_root, monkeypatch
):
    assert sandbox_mode() == "root", "this host cannot make namespaces"
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    layout = new_course(open_course_root, "phys-2025", execute_timeout_s=30)
    answer(layout, open_course_root, "alice", CORRECT)
    collect(layout, PS)
    subprocess.run(["chmod", "-R", "a+rwX", str(open_course_root)], check=True)
    targets = [
        str(layout.course_dir / "gradebook.db"),
        str(next((layout.course_dir / "submitted" / "alice").rglob("*.ipynb"))),
        str(next((layout.course_dir / "source").rglob("*.ipynb"))),
        "/etc/shadow",
    ]
    jobs_before = set(ROOT_WORK_DIR.glob("job-*"))  # left by other runs (killed ones too)
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        port = listener.getsockname()[1]
        code = HOSTILE.format(targets=targets, port=port)
        answer(layout, open_course_root, "mallory", textwrap.indent(code, "    ") + CORRECT)
        collect(layout, PS)
        limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=180)
        outcomes = {
            o.student_id: o
            for o in autograde_assignment(
                layout, PS, ["alice", "mallory"], limits, backend(open_course_root)
            )
        }
    finally:
        listener.close()
    assert (outcomes["alice"].status, outcomes["alice"].score) == ("graded", 4.0)
    notebook = nbformat.read(
        layout.course_dir / "autograded" / "mallory" / PS / f"{DEMO_ASSIGNMENT}.ipynb", 4
    )
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert "FOUND" in printed, printed
    found = json.loads(printed.split("FOUND", 1)[1].splitlines()[0])
    assert found == {"env": [], "proc": [], "readable": [], "writable": [], "net": False}
    # this run's private copies are removed (other runs on the host may have live ones)
    left = set(ROOT_WORK_DIR.glob("job-*")) - jobs_before
    assert [d for d in left if not pid_running(int(d.name.split("-")[1]))] == []


@pytest.mark.slow
@pytest.mark.root
def test_a_module_the_team_leaves_in_the_course_directory_is_never_imported_by_the_autograde(
    grader, open_course_root
):
    """The job runs in the course directory, which the team writes to: not on its import path."""
    layout = new_course(open_course_root, "phys-2025", execute_timeout_s=30)
    answer(layout, open_course_root, "alice", CORRECT)
    collect(layout, PS)
    marker = open_course_root / "imported"
    for name in ("jupyter_client", "nbclient", "nbformat", "traitlets", "sqlalchemy"):
        planted = f"open({str(marker)!r}, 'a').write({name!r})\nraise SystemExit(3)\n"
        (layout.course_dir / f"{name}.py").write_text(planted)
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=180)
    [outcome] = autograde_assignment(layout, PS, ["alice"], limits, backend(open_course_root))
    assert (outcome.status, outcome.score) == ("graded", 4.0), outcome.message
    assert not marker.exists()


def test_a_submission_holding_a_symbolic_link_is_not_graded(tmp_path):
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=30)
    answer(layout, tmp_path, "alice", CORRECT)
    answer(layout, tmp_path, "mallory", CORRECT)
    collect(layout, PS)
    # put in submitted/ by another route than coursehub's collect (nbgrader's, by hand)
    folder = layout.course_dir / "submitted" / "mallory" / PS
    (folder / "data.csv").symlink_to(layout.course_dir / "gradebook.db")
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=120)
    outcomes = {
        o.student_id: o
        for o in autograde_assignment(layout, PS, ["mallory"], limits, backend(tmp_path))
    }
    assert outcomes["mallory"].status == "corrupt"
    assert "data.csv is a symbolic link: not graded" in outcomes["mallory"].message
    assert not (layout.course_dir / "autograded" / "mallory" / PS / "data.csv").exists()


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own autoflush
def test_the_formgraders_autograde_button_runs_the_students_kernel_in_the_sandbox(
    grader, open_course_root, monkeypatch
):
    from nbgrader.apps.api import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    for name, value in SECRET_ENV.items():  # the formgrader's own environment
        monkeypatch.setenv(name, value)
    layout = new_course(open_course_root, "phys-2025", execute_timeout_s=30)
    subprocess.run(["chmod", "-R", "a+rwX", str(open_course_root)], check=True)
    targets = [str(layout.course_dir / "gradebook.db"), "/etc/shadow"]
    code = HOSTILE.format(targets=targets, port=9)
    answer(layout, open_course_root, "mallory", textwrap.indent(code, "    ") + CORRECT)
    collect(layout, PS)
    monkeypatch.chdir(layout.course_dir)  # the formgrader runs in the course directory
    config = PyFileConfigLoader("nbgrader_config.py", str(layout.course_dir)).load_config()
    ensure_students(layout, ["mallory"])  # the formgrader's students come from the roster sync
    result = NbGraderAPI(config=config).autograde(PS, "mallory", create=False)
    assert result["success"], result
    notebook = nbformat.read(
        layout.course_dir / "autograded" / "mallory" / PS / f"{DEMO_ASSIGNMENT}.ipynb", 4
    )
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    found = json.loads(printed.split("FOUND", 1)[1].splitlines()[0])
    assert found == {"env": [], "proc": [], "readable": [], "writable": [], "net": False}


DAEMON = """\
import resource, subprocess
subprocess.Popen(["setsid", "sh", "-c", "sleep {marker} & sleep {marker}"],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("NPROC", resource.getrlimit(resource.RLIMIT_NPROC)[0])
"""


@pytest.mark.slow
@pytest.mark.root
def test_a_submissions_daemons_die_with_its_kernel_and_it_cannot_fork_without_limit(
    grader, tmp_path
):
    from coursehub.sandbox.account import SANDBOX_MAX_TASKS

    marker = str(900000 + secrets.randbelow(90000))
    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=30)
    code = DAEMON.format(marker=marker)
    answer(layout, tmp_path, "mallory", textwrap.indent(code, "    ") + CORRECT)
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=180)
    [outcome] = autograde_assignment(layout, PS, ["mallory"], limits, backend(tmp_path))
    assert outcome.status == "graded", outcome
    notebook = nbformat.read(
        layout.course_dir / "autograded" / "mallory" / PS / f"{DEMO_ASSIGNMENT}.ipynb", 4
    )
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert f"NPROC {SANDBOX_MAX_TASKS}" in printed, printed
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout == ""


@pytest.mark.root
def test_the_students_kernel_cannot_open_a_gpu_device(grader, open_course_root):
    from coursehub.sandbox.account import ensure_sandbox_account

    account = ensure_sandbox_account(grader)
    node = open_course_root / "nvidia0"  # a stand-in device: /dev/zero's numbers (1, 5), 0666
    subprocess.run(["mknod", "-m", "666", str(node), "c", "1", "5"], check=True)
    read = ["head", "-c", "4", str(node)]
    assert subprocess.run(read, capture_output=True).stdout == b"\0" * 4  # outside: readable
    sandboxed = plan_sandbox_command(read, SandboxPlan(sandbox_mode(), account, devices=(node,)))
    done = subprocess.run(sandboxed, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""  # /dev/null in its place


@pytest.mark.slow
@pytest.mark.root
def test_as_root_autograde_grades_when_the_catalogs_folder_holds_the_courses_and_exchange(
    grader, open_course_root, monkeypatch
):
    # the demo's layout: DATA/courses and DATA/exchange inside the catalog's DATA
    monkeypatch.setenv("COURSEHUB_DATA_DIR", str(open_course_root))
    layout = new_course(open_course_root, "phys-2025", execute_timeout_s=30)
    answer(layout, open_course_root, "alice", CORRECT)
    collect(layout, PS)
    limits = AutogradeLimits(n_threads=1, mem_limit=2 * 2**30, timeout_s=180)
    [outcome] = autograde_assignment(layout, PS, ["alice"], limits, backend(open_course_root))
    assert (outcome.status, outcome.score) == ("graded", 4.0), outcome.message


def test_a_kernel_that_died_before_running_a_cell_is_a_host_error_not_the_students(tmp_path):
    from types import SimpleNamespace

    from coursehub.grading.autograde.job import finish_grading, job_log_path
    from coursehub.grading.autograde.outcomes import HOST_ERROR

    layout = new_course(tmp_path, "phys-2025", execute_timeout_s=30)
    answer(layout, tmp_path, "alice", CORRECT)
    collect(layout, PS)
    ensure_students(layout, ["alice"])
    log = job_log_path(layout, PS, "alice")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(
        "[AutogradeApp | ERROR] RuntimeError: Kernel died before replying to kernel_info\n"
    )
    result = SimpleNamespace(killed_reason=None, ok=False, returncode=1)
    outcome = finish_grading(layout, PS, "alice", result)
    assert outcome.status == HOST_ERROR and outcome.score == 0
    log.write_text("[AutogradeApp | ERROR] There was an error processing assignment\n")
    assert finish_grading(layout, PS, "alice", result).status == "failed"
