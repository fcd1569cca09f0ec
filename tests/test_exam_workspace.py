"""The exam workspace: exam server traits, exam homes, the spawn during a running exam, autosave.

Pure plans first; then, as root, a real account's exam home and a real
spawner (JupyterHub's ``SimpleLocalProcessSpawner``) started during a
running exam, against a course app answering on a local port; the autosave
copies real folders (``sha256sum -c`` checks its list).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import stat
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tornado import httpserver, netutil, web

from coursehub.contract import make_profile
from coursehub.contract import profile_to_json as render_profile
from coursehub.errors import UsageError
from coursehub.examroom.home import ensure_exam_home, plan_exam_home, release_dir
from coursehub.examroom.server import (
    CLOCK_EXTENSION,
    EXAM_SERVER_EXTENSIONS,
    KERNEL_MANAGER,
    ExamSeat,
    configured_server_extensions,
    plan_exam_traits,
    plan_extension_switches,
    plan_unit_network,
)
from coursehub.grading.examsnapshot import snapshot_exam
from coursehub.spawn.examserver import (
    ExamServers,
    exam_config,
    exam_servers_from_env,
    home_owner,
    merge_traits,
    running_sitting,
)
from coursehub.spawn.jupytertools import config_dir
from coursehub.spawn.spawner import CourseProfiles
from helpers import local_spawner

COURSE, EXAM = "mlmeca-2025", "final"
M2 = make_profile("m2", cpu_limit=2, mem_limit="4G", n_threads=2)
BIG = make_profile("big", cpu_limit=4, mem_limit="8G")
SEAT = ExamSeat(COURSE, EXAM, Path("/srv/exams/mlmeca-2025/final/alice"), "numpy,pandas", "")

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a student account")


def test_an_exam_server_starts_in_the_exam_home_without_terminal_and_with_exam_kernels():
    traits = plan_exam_traits(SEAT, "local", ["--debug"])
    assert traits["notebook_dir"] == str(SEAT.home)
    assert traits["args"][0] == "--debug"
    assert "--ServerApp.terminals_enabled=False" in traits["args"]
    assert f"--MultiKernelManager.kernel_manager_class={KERNEL_MANAGER}" in traits["args"]
    assert "--ExamKernelManager.allowed_imports=numpy,pandas" in traits["args"]
    assert traits["environment"]["HOME"] == str(SEAT.home)
    assert traits["environment"]["COURSEHUB_EXAM"] == "mlmeca-2025/final"
    assert "unit_extra_properties" not in traits


def test_an_exam_server_turns_off_every_configured_extension_but_lab_and_the_clock():
    configured = ["jupyterlab", "nbgrader.server_extensions.validate_assignment", "nbgitpuller"]
    args = plan_exam_traits(SEAT, "local", [], configured=configured)["args"]
    off = [a for a in args if a.startswith("--ServerApp.jpserver_extensions=")]
    assert off == [
        f"--ServerApp.jpserver_extensions={CLOCK_EXTENSION}=True",
        "--ServerApp.jpserver_extensions=nbgitpuller=False",
        "--ServerApp.jpserver_extensions=nbgrader.server_extensions.validate_assignment=False",
    ]
    assert plan_extension_switches(EXAM_SERVER_EXTENSIONS) == []
    assert f"--LabApp.workspaces_dir={SEAT.home}/.jupyter/lab/workspaces" in args


def test_an_exam_servers_own_config_dir_is_coursehubs_read_only_exam_directory():
    config = exam_config("/etc/coursehub/jupyter")
    exam = config_dir("exam")
    assert config == {
        "JUPYTER_CONFIG_PATH": os.pathsep.join([exam, "/etc/coursehub/jupyter"]),
        "JUPYTER_CONFIG_DIR": exam,
    }
    assert exam_config("")["JUPYTER_CONFIG_PATH"] == exam
    assert configured_server_extensions([str(Path(exam) / "missing")]) == []


def test_a_systemd_exam_unit_reaches_only_the_hub_over_ip():
    traits = plan_exam_traits(SEAT, "systemd", [], hub_addresses=("10.0.0.5", "127.0.0.1"))
    assert traits["unit_extra_properties"] == {
        "IPAddressDeny": "any",
        "IPAddressAllow": "10.0.0.5 127.0.0.1",
    }
    with pytest.raises(ValueError, match="hub's address"):
        plan_unit_network([])


def test_exam_traits_merge_into_the_course_profile_without_dropping_its_limits():
    profile = {"cpu_limit": 2.0, "environment": {"OMP_NUM_THREADS": "2"}}
    merged = merge_traits(profile, plan_exam_traits(SEAT, "local", []))
    assert merged["cpu_limit"] == 2.0
    assert merged["environment"]["OMP_NUM_THREADS"] == "2"
    assert merged["environment"]["HOME"] == str(SEAT.home)


def test_an_exam_home_path_refuses_a_name_that_is_not_one_folder():
    home = plan_exam_home("/srv/exams", COURSE, EXAM, "alice")
    assert home == Path("/srv/exams/mlmeca-2025/final/alice")
    with pytest.raises(UsageError, match=r"student: '\.\.' cannot be a folder name"):
        plan_exam_home("/srv/exams", COURSE, EXAM, "..")
    with pytest.raises(UsageError, match="assignment: 'a/b'"):
        plan_exam_home("/srv/exams", COURSE, "a/b", "alice")


def test_the_hub_makes_exam_servers_only_with_the_course_apps_url():
    assert exam_servers_from_env({}) is None
    exams = exam_servers_from_env(
        {
            "COURSEHUB_EXAM_URL": "http://127.0.0.1:10101/services/coursehub/",
            "COURSEHUB_EXAM_HUB_ADDRESSES": "10.0.0.5 127.0.0.1",
            "COURSEHUB_EXAM_HIDDEN": "/home",
        }
    )
    assert exams is not None and exams.base_url == "http://127.0.0.1:10101/services/coursehub"
    assert (exams.exam_root, exams.exchange_root) == (
        "/srv/coursehub/exams",
        "/usr/local/share/nbgrader/exchange",
    )
    assert exams.hub_addresses == ("10.0.0.5", "127.0.0.1") and exams.hidden == ("/home",)


def test_a_sitting_runs_once_started_and_until_no_second_is_left():
    assert running_sitting({"started_at": "2026-01-12T10:00:00+00:00", "seconds_left": 30})
    assert not running_sitting({"started_at": "2026-01-12T10:00:00+00:00", "seconds_left": 0})
    assert not running_sitting({"started_at": None, "seconds_left": None})


@pytest.fixture
def student():
    """A fresh Unix account (``chtest-e...``), deleted afterwards (root only)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a student account")
    name = f"chtest-e{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--no-create-home", name], check=True)
    yield pwd.getpwnam(name)
    subprocess.run(["userdel", name], check=False, capture_output=True)


def released(exchange: Path) -> Path:
    folder = release_dir(exchange, COURSE, EXAM)
    folder.mkdir(parents=True)
    (folder / "final.ipynb").write_text('{"cells": []}\n')
    return folder


def test_an_exam_home_is_the_students_alone_and_fetched_once(tmp_path, student):
    release = released(tmp_path / "exchange")
    home = plan_exam_home(tmp_path / "exams", COURSE, EXAM, student.pw_name)
    work = ensure_exam_home(home, student.pw_uid, student.pw_gid, release, COURSE, EXAM)
    assert work == home / COURSE / EXAM
    assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (student.pw_uid, 0o700)
    assert (work / "final.ipynb").stat().st_uid == student.pw_uid
    assert stat.S_IMODE(home.parent.stat().st_mode) == 0o711 and home.parent.stat().st_uid == 0
    (work / "final.ipynb").write_text("my answer")
    ensure_exam_home(home, student.pw_uid, student.pw_gid, release, COURSE, EXAM)
    assert (work / "final.ipynb").read_text() == "my answer"  # a restart keeps the work
    with pytest.raises(UsageError, match="not released"):
        ensure_exam_home(home.parent / "x", 0, 0, tmp_path / "none", COURSE, EXAM)


class CourseApp:
    """The course app's two exam answers for one student (``seconds_left`` settable)."""

    def __init__(self, username: str) -> None:
        self.username = username
        self.seconds_left = 1800
        self.tokens: list[str] = []

    def handlers(self) -> list:
        app = self

        class Exams(web.RequestHandler):
            def get(self, course_id: str) -> None:
                app.tokens.append(self.request.headers.get("Authorization", ""))
                exams = [{"assignment": EXAM, "allowed_imports": "numpy"}]
                self.write({"exams": exams if course_id == COURSE else []})

        class Sitting(web.RequestHandler):
            def get(self, course_id: str, assignment: str, username: str) -> None:
                assert username == app.username
                started = "2026-01-12T10:00:00+00:00"
                self.write({"started_at": started, "seconds_left": app.seconds_left})

        base = "/api/v1/courses/([^/]+)/exams"
        return [(base, Exams), (base + "/([^/]+)/sittings/([^/]+)", Sitting)]


@needs_root
def test_a_start_for_any_course_during_the_exam_is_its_exam_server_and_after_it_is_not(
    tmp_path, student
):
    released(tmp_path / "exchange")
    groups = [(f"nbgrader-{COURSE}", {"profile": render_profile(M2)})]
    groups += [("nbgrader-other-2025", {"profile": render_profile(BIG)})]
    spawner = local_spawner(groups, name=student.pw_name)
    spawner.api_token = "secret-token"
    spawner.notebook_dir = "/home/course"
    course_app = CourseApp(student.pw_name)

    async def start_twice() -> list[tuple[str, list[str], float]]:
        server = httpserver.HTTPServer(web.Application(course_app.handlers()))
        sockets = netutil.bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        exams = ExamServers(
            f"http://127.0.0.1:{port}", str(tmp_path / "exams"), str(tmp_path / "exchange")
        )
        profiles = CourseProfiles("local", gpu_ids=(), state_path=tmp_path / "g.json", exams=exams)
        seen = []
        for seconds_left in (1800, 0):
            course_app.seconds_left = seconds_left
            await profiles.apply(spawner, {"course": "other-2025"})  # asks the other course
            seen.append((spawner.notebook_dir, list(spawner.args), spawner.cpu_limit))
            env.append(dict(spawner.environment))
        server.stop()
        return seen

    env: list[dict[str, str]] = []
    during, after = asyncio.run(start_twice())
    home = tmp_path / "exams" / COURSE / EXAM / student.pw_name
    assert during[0] == str(home) and during[2] == 2.0  # the exam course's limits
    assert "--ServerApp.terminals_enabled=False" in during[1]
    assert "--ExamKernelManager.allowed_imports=numpy" in during[1]
    assert (home / COURSE / EXAM / "final.ipynb").is_file()
    assert "--ServerApp.jpserver_extensions=nbgitpuller=False" in during[1]
    assert env[0]["JUPYTER_CONFIG_DIR"] == config_dir("exam")
    assert env[0]["JUPYTER_CONFIG_PATH"].startswith(config_dir("exam") + os.pathsep)
    assert after == ("/home/course", [], 4.0)  # the course asked for, after the exam
    assert "JUPYTER_CONFIG_DIR" not in env[1]
    assert not env[1]["JUPYTER_CONFIG_PATH"].startswith(config_dir("exam"))
    assert course_app.tokens[0] == "token secret-token"


def test_a_demo_hub_owns_the_exam_home_of_a_student_without_a_unix_account(tmp_path):
    """The demo's servers all run as the hub's account: so does the exam home."""
    released(tmp_path / "exchange")
    groups = [(f"nbgrader-{COURSE}", {"profile": render_profile(M2)})]
    spawner = local_spawner(groups, name="p2501001")  # a hub user, no Unix account
    spawner.api_token = "secret-token"
    course_app = CourseApp("p2501001")

    async def start() -> None:
        server = httpserver.HTTPServer(web.Application(course_app.handlers()))
        sockets = netutil.bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        exams = exam_servers_from_env(
            {
                "COURSEHUB_EXAM_URL": f"http://127.0.0.1:{port}/",
                "COURSEHUB_EXAM_ROOT": str(tmp_path / "exams"),
                "COURSEHUB_GRADING_EXCHANGE": str(tmp_path / "exchange"),
            },
            hub_owned=True,
        )
        profiles = CourseProfiles("local", gpu_ids=(), state_path=tmp_path / "g.json", exams=exams)
        await profiles.apply(spawner, {})
        server.stop()

    asyncio.run(start())
    home = tmp_path / "exams" / COURSE / EXAM / "p2501001"
    assert spawner.notebook_dir == str(home)
    assert spawner.environment["COURSEHUB_EXAM"] == f"{COURSE}/{EXAM}"
    assert (home / COURSE / EXAM / "final.ipynb").stat().st_uid == os.getuid()
    assert home_owner("p2501001", hub_owned=True) == (os.getuid(), os.getgid())
    with pytest.raises(KeyError):
        home_owner("p2501001")


def test_the_autosave_keeps_the_latest_copy_and_its_sha256_list(tmp_path):
    homes = tmp_path / "homes"
    work = homes / "alice" / COURSE / EXAM
    work.mkdir(parents=True)
    (work / "final.ipynb").write_text("first")
    (work / "secret").symlink_to("/etc/passwd")
    os.mkfifo(work / "pipe")
    store = tmp_path / "store"
    first = snapshot_exam(homes, store, datetime(2026, 1, 12, 10, 1, tzinfo=UTC))["alice"]
    latest = store / "alice" / "latest"
    assert sorted(first.files) == [f"{COURSE}/{EXAM}/final.ipynb"]
    assert sorted(first.skipped) == [f"{COURSE}/{EXAM}/pipe", f"{COURSE}/{EXAM}/secret"]
    (work / "final.ipynb").write_text("second")
    second = snapshot_exam(homes, store)["alice"]
    assert (latest / COURSE / EXAM / "final.ipynb").read_text() == "second"
    assert second.manifest_sha256 != first.manifest_sha256
    assert stat.S_IMODE((store / "alice").stat().st_mode) == 0o700
    checked = subprocess.run(
        ["sha256sum", "-c", "../SHA256SUMS"], cwd=latest, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (store / "alice" / "taken_at").read_text().startswith("20")
    assert not list((store / "alice").glob(".latest*"))


def test_the_watch_copies_a_home_again_only_once_it_changed(tmp_path):
    work = tmp_path / "homes" / "alice" / COURSE / EXAM
    work.mkdir(parents=True)
    (work / "final.ipynb").write_text("first")
    seen: dict = {}
    store = tmp_path / "store"
    assert list(snapshot_exam(tmp_path / "homes", store, seen=seen)) == ["alice"]
    assert snapshot_exam(tmp_path / "homes", store, seen=seen) == {}
    (work / "notes.py").write_text("x = 1")
    again = snapshot_exam(tmp_path / "homes", store, seen=seen)
    assert sorted(again["alice"].files) == [
        f"{COURSE}/{EXAM}/final.ipynb",
        f"{COURSE}/{EXAM}/notes.py",
    ]


def test_the_snapshot_command_names_a_bad_interval(tmp_path, capsys):
    from coursehub.cli import main

    (tmp_path / COURSE / EXAM).mkdir(parents=True)
    argv = ["exam", "snapshot", COURSE, EXAM, "--homes", str(tmp_path), "--every", "soon"]
    assert main(argv) == 2
    assert "--every: must be 0.5 to 3600 seconds, got 'soon'" in capsys.readouterr().err
