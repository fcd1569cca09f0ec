"""Students see student tools only: per-server Jupyter config from the user's hub groups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from coursehub.spawn.jupytertools import (
    STUDENT,
    TEAM,
    config_dir,
    plan_config_path,
    plan_tools,
    shipped_files,
)
from coursehub.spawn.spawner import CourseProfiles
from helpers import free_port, local_spawner, wait_until


@pytest.mark.parametrize(
    ("groups", "admin", "tools"),
    [
        (["nbgrader-mlmeca-2025"], False, STUDENT),
        (["nbgrader-mlmeca-2025", "formgrade-numflu-2025"], False, TEAM),
        (["formgrade-mlmeca-2025"], False, TEAM),
        ([], False, STUDENT),
        (["coursehub-users", "formgrade"], False, STUDENT),
        ([], True, TEAM),
    ],
)
def test_tools_follow_the_users_course_teams(groups, admin, tools):
    assert plan_tools(groups, admin) == tools


def test_a_students_config_path_puts_coursehubs_directories_before_the_admins():
    path = plan_config_path(STUDENT, "/srv/nbgrader/jupyter").split(os.pathsep)
    assert path == [config_dir("student"), config_dir("common"), "/srv/nbgrader/jupyter"]
    assert plan_config_path(TEAM).split(os.pathsep) == [config_dir("team"), config_dir("common")]
    with pytest.raises(ValueError, match="tools must be"):
        plan_config_path("teacher")


def test_the_shipped_config_files_are_the_rendered_ones():
    root = Path(config_dir("common")).parent
    for relative, document in shipped_files().items():
        assert json.loads((root / relative).read_text()) == document, relative


def make_spawner(groups, admin=False):
    return local_spawner(groups, admin=admin)


def test_the_spawner_gives_a_student_the_student_directory_and_keeps_the_admins(tmp_path):
    profiles = CourseProfiles("local", gpu_ids=[], state_path=tmp_path / "gpus.json")
    spawner = make_spawner(["nbgrader-mlmeca-2025"])
    spawner.environment = {"JUPYTER_CONFIG_PATH": "/srv/nbgrader/jupyter"}
    profiles.apply(spawner, {})
    assert spawner.environment["JUPYTER_CONFIG_PATH"] == plan_config_path(
        STUDENT, "/srv/nbgrader/jupyter"
    )
    spawner.user.groups.append(SimpleNamespace(name="formgrade-mlmeca-2025", properties={}))
    profiles.apply(spawner, {})  # made a grader: the next start has the team's tools
    assert spawner.environment["JUPYTER_CONFIG_PATH"] == plan_config_path(
        TEAM, "/srv/nbgrader/jupyter"
    )


#: nbgrader 0.9.6's server extensions (its ``jupyter-config``).
NBGRADER_EXTENSIONS = ("formgrader", "course_list", "assignment_list", "validate_assignment")


@pytest.mark.integration
@pytest.mark.parametrize(
    ("tools", "loaded"),
    [
        (STUDENT, {"assignment_list", "validate_assignment"}),
        # the team's formgraders are hub services: no local formgrader (jupyter/nbgrader#1857)
        (TEAM, {"course_list", "assignment_list", "validate_assignment"}),
    ],
)
def test_a_real_server_loads_nbgraders_extensions_for_its_tools(tools, loaded, tmp_path):
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_PATH": plan_config_path(tools), "HOME": str(tmp_path)}
    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}"]
    command += ["--ServerApp.jpserver_extensions=coursehub.spawn.busyactivity=True"]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=out)
    try:
        wait_until(lambda: "is running at" in log.read_text(), 60, 0.3, what="jupyter server")
    finally:
        server.terminate()
        server.wait(30)
    text = log.read_text()
    ok = "nbgrader.server_extensions.{} | extension was successfully loaded"
    assert {name for name in NBGRADER_EXTENSIONS if ok.format(name) in text} == loaded, text
    assert "coursehub.spawn.busyactivity | extension was successfully loaded" in text
