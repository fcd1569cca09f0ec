"""The one sandbox: nested hidden folders, an installation under a folder the account cannot enter.

The pure plans are checked from tables; as root, the same plans run for
real: a virtualenv under a 0700 folder (a clone in ``/root``, as the README
installs it for root) starts as the sandbox account, and the rest of that
folder stays out of sight.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from coursehub.errors import CoursehubError
from coursehub.sandbox.account import SandboxAccount, ensure_sandbox_account
from coursehub.sandbox.command import Exposure, SandboxPlan, plan_sandbox_command, sandbox_mode
from coursehub.sandbox.folders import blocking_folder, hidden_paths, plan_exposures
from coursehub.sandbox.plan import make_plan
from coursehub.sandbox.preflight import check_plan

NOBODY = SandboxAccount("nobody", 65534, 65534)


def test_nested_hidden_folders_are_hidden_once_by_the_outermost(tmp_path):
    data = tmp_path / "data"
    for sub in ("nbgrader/courses", "nbgrader/exchange", "slots"):
        (data / sub).mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    paths = [data / "nbgrader/courses", data, data / "nbgrader/exchange", other]
    assert hidden_paths(paths, keep=[]) == sorted([str(data), str(other)])


def test_a_hidden_folder_holding_the_jobs_own_folder_or_under_a_cover_is_left_out(tmp_path):
    for sub in ("a/job", "b", "cover/c"):
        (tmp_path / sub).mkdir(parents=True)
    hidden = hidden_paths(
        [tmp_path / "a", tmp_path / "b", tmp_path / "cover/c", tmp_path / "missing"],
        keep=[tmp_path / "a/job"],
        covered=[tmp_path / "cover"],
    )
    assert hidden == [str(tmp_path / "b")]


def test_a_folder_the_account_cannot_enter_blocks_what_lies_below_it(open_tmp):
    tmp_path = open_tmp
    closed = tmp_path / "root-home"
    (closed / "clone/.venv").mkdir(parents=True)
    closed.chmod(0o700)
    if os.geteuid() != 0 and closed.stat().st_uid == NOBODY.uid:
        pytest.skip("runs as nobody")
    assert blocking_folder(closed / "clone/.venv", NOBODY) == closed
    assert blocking_folder(tmp_path, NOBODY) is None


def test_an_installation_under_a_closed_folder_is_exposed_over_a_cover(open_tmp):
    closed = open_tmp / "root"
    for sub in ("clone/.venv", "clone/src", "clone/.venv/lib"):
        (closed / sub).mkdir(parents=True)
    closed.chmod(0o700)
    exposures = plan_exposures(
        [closed / "clone/.venv", closed / "clone/src", closed / "clone/.venv/lib", "/usr"],
        NOBODY,
    )
    venv, src = str(closed / "clone/.venv"), str(closed / "clone/src")
    assert exposures == [Exposure(str(closed), (venv, src))]


def test_the_namespace_command_stages_covers_and_hides_in_that_order():
    plan = SandboxPlan(
        "root",
        NOBODY,
        hidden=("/srv/courses",),
        exposures=(Exposure("/root", ("/root/clone/.venv",)),),
        stage_dir="/tmp/job/stage",
    )
    cmd = plan_sandbox_command(["python", "-c", "1"], plan)
    args = cmd[cmd.index("coursehub-sandbox") + 1 :]
    venv = "/root/clone/.venv"
    # the cover's source: none (a tmpfs)
    assert args[:11] == ["1", venv, "1", "", "/root", "1", "ro", venv, "1", "/srv/courses", "0"]
    assert "STAGE=/tmp/job/stage" in cmd
    assert cmd[-3:] == ["python", "-c", "1"]


def test_a_plan_with_network_keeps_it_and_one_without_gets_its_own():
    with_net = plan_sandbox_command(["k"], SandboxPlan("userns", network=True))
    without = plan_sandbox_command(["k"], SandboxPlan("userns"))
    assert "--net" not in with_net and "--net" in without


def test_exposures_need_a_stage_folder():
    plan = SandboxPlan("root", NOBODY, exposures=(Exposure("/root", ("/root/x",)),))
    with pytest.raises(ValueError, match="stage folder"):
        plan_sandbox_command(["k"], plan)


@pytest.fixture
def account(sandbox_user):
    """The test's own sandbox account (:func:`conftest.sandbox_user`), created."""
    return ensure_sandbox_account(sandbox_user)


@pytest.fixture
def closed_venv():
    """A virtualenv inside a 0700 folder owned by root, as ``make setup`` leaves one in /root."""
    top = Path(tempfile.mkdtemp(prefix="chtest-closed-"))
    top.chmod(0o700)
    venv = top / "clone" / ".venv"
    (top / "clone").mkdir(mode=0o755)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    (top / "secret.txt").write_text("root's own file")
    yield venv
    subprocess.run(["rm", "-rf", str(top)])


PROBE = "import pathlib, sys; print(sys.prefix); print(pathlib.Path(sys.argv[1]).exists())"


@pytest.mark.root
def test_as_root_a_virtualenv_under_a_closed_folder_runs_as_the_sandbox_account(
    account, closed_venv
):
    if sandbox_mode() != "root":
        pytest.skip("this host cannot make mount namespaces")
    python = str(closed_venv / "bin" / "python")
    secret = closed_venv.parent.parent / "secret.txt"
    with tempfile.TemporaryDirectory() as stage:
        plan = make_plan(needed=[closed_venv], stage_dir=stage, account_name=account.name)
        assert [e.cover for e in plan.exposures] == [str(closed_venv.parent.parent)]
        done = subprocess.run(
            plan_sandbox_command([python, "-c", PROBE, str(secret)], plan),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(closed_venv), "False"]  # its venv, not root's file


@pytest.mark.root
def test_without_mount_namespaces_a_closed_installation_is_refused_in_one_line(
    account, closed_venv
):
    plan = SandboxPlan("uid", account)
    with pytest.raises(CoursehubError) as raised:
        check_plan(plan, str(closed_venv / "bin" / "python"), needed=[closed_venv])
    message = str(raised.value)
    # the virtualenv's folder, or the folder of the Python it was made from (here: /root)
    assert "cannot enter /" in message and "(mode 0700, owner root)" in message
    assert "\n" not in message and "/opt/coursehub" in message


@pytest.mark.root
def test_the_preflight_passes_for_the_interpreter_running_coursehub(account):
    check_plan(make_plan(account_name=account.name), code="pass")


def test_private_folders_of_ended_jobs_are_swept_and_those_of_running_ones_kept(tmp_path):
    from coursehub.sandbox.workdir import sweep_job_dirs

    ended = subprocess.Popen(["true"])
    ended.wait()
    gone = tmp_path / f"job-{ended.pid}-abc"
    live = tmp_path / f"job-{os.getpid()}-def"
    other = tmp_path / "unrelated"
    for folder in (gone, live, other):
        (folder / "work").mkdir(parents=True)
        (folder / "work" / "ps1.ipynb").write_text("{}")
    assert sweep_job_dirs(tmp_path, "job-") == [gone]
    assert not gone.exists() and live.exists() and other.exists()


@pytest.mark.root
def test_a_new_job_folder_is_private_and_names_its_process():
    from coursehub.sandbox.workdir import ROOT_WORK_DIR, make_job_dir

    folder = make_job_dir()
    try:
        assert folder.parent == ROOT_WORK_DIR and folder.name.startswith(f"job-{os.getpid()}-")
        assert folder.stat().st_mode & 0o777 == 0o700
        assert ROOT_WORK_DIR.stat().st_mode & 0o777 == 0o711
    finally:
        folder.rmdir()


def test_the_jobs_working_directory_on_the_import_path_never_unhides_its_parent(
    open_tmp, monkeypatch
):
    course = open_tmp / "courses" / "phys-2025"
    course.mkdir(parents=True)
    monkeypatch.chdir(course)  # an autograde job runs in the course directory, and
    monkeypatch.syspath_prepend(str(course))  # `python -m` puts it first on sys.path
    plan = make_plan([open_tmp / "courses"], mode="userns")
    assert plan.hidden == (str(open_tmp / "courses"),)


WRITE_PROBE = (
    "import os, pathlib, sys; pathlib.Path(sys.argv[1], 'written').write_text('ok'); "
    "print(pathlib.Path(sys.argv[2]).exists(), oct(os.umask(0)))"
)


@pytest.mark.root
def test_a_writable_exposure_is_written_in_place_and_the_rest_of_the_closed_folder_hidden(
    account, closed_venv
):
    """A formgrader's course directory under a closed folder (the demo's data under /root)."""
    if sandbox_mode() != "root":
        pytest.skip("this host cannot make mount namespaces")
    top = closed_venv.parent.parent
    course = top / "data" / "courses" / "phys-2025"
    course.mkdir(parents=True)
    os.chown(course, account.uid, account.gid)
    python = str(closed_venv / "bin" / "python")
    with tempfile.TemporaryDirectory() as stage:
        plan = make_plan(
            needed=[closed_venv],
            writable=[course],
            stage_dir=Path(stage) / "formgrader",  # created by the namespace's shell
            account_name=account.name,
            network=True,
            pid_namespace=False,
        )
        [exposure] = plan.exposures
        assert exposure.writable == (str(course),)
        done = subprocess.run(
            plan_sandbox_command(
                [python, "-c", WRITE_PROBE, str(course), str(top / "secret.txt")], plan
            ),
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: os.umask(0o077),  # the demo's: the cover's folders stay open
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "0o77"]  # and the job gets the caller's umask back
    assert (course / "written").read_text() == "ok"


@pytest.mark.root
def test_without_a_pid_namespace_the_job_itself_gets_the_callers_signals(account):
    """A hub stops a managed service with SIGTERM: it must reach the formgrader, not a shell."""
    if sandbox_mode() != "root":
        pytest.skip("this host cannot make mount namespaces")
    import signal
    import time

    code = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(120)"
    plan = make_plan(account_name=account.name, network=True, pid_namespace=False)
    with tempfile.TemporaryDirectory() as stage:
        plan = SandboxPlan(**{**plan.__dict__, "stage_dir": stage if plan.exposures else ""})
        job = subprocess.Popen(
            plan_sandbox_command([sys.executable, "-c", code], plan),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert job.stdout is not None
            assert int(job.stdout.readline()) == job.pid  # the job is the process the caller holds
            started = time.monotonic()
            job.send_signal(signal.SIGTERM)
            assert job.wait(timeout=30) == -signal.SIGTERM
            assert time.monotonic() - started < 30
        finally:
            job.kill()
            job.wait()
            if job.stdout is not None:
                job.stdout.close()
