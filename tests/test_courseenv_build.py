"""Course environments: requirements checked, built aside, switched atomically, one kernel each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from coursehub.courseenv.build import build_environment
from coursehub.courseenv.errors import EnvBuildError
from coursehub.courseenv.layout import env_paths, read_log_tail, read_state
from coursehub.courseenv.plan import plan_prune, plan_stamp
from coursehub.courseenv.requirements import parse_requirements, render_requirements
from coursehub.errors import UsageError
from coursehub.spawn.coursespaces import CourseSpaces
from test_spawner_classes import make_spawner


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("numpy>=1.26\n# comment\n\npandas  # inline\n", ["numpy>=1.26", "pandas"]),
        ('torch; sys_platform == "linux"', ['torch; sys_platform == "linux"']),
    ],
)
def test_requirements_are_pep_508_lines(text, expected):
    assert parse_requirements(text, "req.txt") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("--index-url http://evil/simple", "line 1: pip options are not allowed"),
        ("numpy\n-e .", "line 2: pip options are not allowed"),
        ("pkg @ https://example.org/pkg.whl", "not URLs or paths"),
        ("./local", "not URLs or paths"),
        ("numpy>=>1", "line 1: not a requirement"),
        ("numpy\nNumPy==1.0", "line 2: NumPy is already named on line 1"),
    ],
)
def test_a_bad_requirement_is_refused_with_its_line(text, message):
    with pytest.raises(UsageError, match=message):
        parse_requirements(text, "req.txt")


def test_a_malformed_requirement_is_refused_in_one_line():
    with pytest.raises(UsageError, match="line 1: not a requirement") as info:
        parse_requirements("brkevil --global-option=x", "req.txt")
    assert "\n" not in str(info.value)


def test_a_build_gets_a_new_name_even_in_the_same_second():
    now = datetime(2025, 9, 1, 8, 0, 0, tzinfo=UTC)
    assert plan_stamp(now, set()) == "20250901T080000Z"
    assert plan_stamp(now, {"20250901T080000Z"}) == "20250901T080000Z-2"


@pytest.mark.parametrize(
    ("builds", "current", "in_use", "removed"),
    [
        (["a", "b", "c", "d"], "d", set(), ["a", "b"]),
        (["a", "b", "c", "d"], "d", {"a"}, ["b"]),
        (["a", "b"], "b", set(), []),
    ],
)
def test_old_builds_are_removed_unless_current_previous_or_in_use(builds, current, in_use, removed):
    assert plan_prune(builds, current, in_use) == removed


def test_a_course_without_requirements_is_told_how_to_declare_them(tmp_path):
    with pytest.raises(UsageError, match="env set c-2025"):
        build_environment(tmp_path, "c-2025")


def declare(root, course_id, lines):
    paths = env_paths(root, course_id)
    paths.home.mkdir(parents=True, exist_ok=True)
    paths.requirements.write_text(render_requirements(lines))
    return paths


def kernels_seen(jupyter_path: str) -> set[str]:
    """Kernel names a server with this JUPYTER_PATH finds (jupyter_client, a fresh process)."""
    code = (
        "from jupyter_client.kernelspec import KernelSpecManager as K; "
        "print(*K().find_kernel_specs())"
    )
    env = {**os.environ, "JUPYTER_PATH": jupyter_path}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return set(out.stdout.split())


@pytest.mark.slow
def test_a_build_switches_atomically_and_a_failed_one_keeps_the_previous(open_tmp):
    tmp_path = open_tmp  # the sandbox account enters the build folder as root
    paths = declare(tmp_path, "a-2025", ["six"])
    state = build_environment(tmp_path, "a-2025")
    assert state["status"] == "ok" and state["size_bytes"] > 0
    build = paths.builds / state["build"]
    assert os.readlink(paths.current) == os.path.join("builds", state["build"])
    spec = json.loads((paths.kernel_dir / "kernel.json").read_text())
    assert spec["argv"][0] == str(build / "bin" / "python")
    ran = subprocess.run([spec["argv"][0], "-c", "import six, ipykernel"], capture_output=True)
    assert ran.returncode == 0

    paths.requirements.write_text("coursehub-no-such-package-anywhere==9.9\n")
    with pytest.raises(EnvBuildError, match=r"a-2025.*pip install"):
        build_environment(tmp_path, "a-2025")
    failed = read_state(paths)
    assert failed["status"] == "failed" and failed["build"] == state["build"]
    assert "coursehub-no-such-package-anywhere" in read_log_tail(paths, failed["log"])
    assert os.readlink(paths.current) == os.path.join("builds", state["build"])
    assert json.loads((paths.kernel_dir / "kernel.json").read_text()) == spec
    assert sorted(p.name for p in paths.builds.iterdir()) == [state["build"]]

    # the kernel is seen by the course's servers only
    def jupyter_path(group):
        spawner = make_spawner("slurm")  # the real SlurmSpawner; no home to touch
        spawner.user.groups = [SimpleNamespace(name=group, properties={})]
        CourseSpaces("slurm", root=str(tmp_path))(spawner)
        return spawner.environment["JUPYTER_PATH"]

    assert "course-a-2025" in kernels_seen(jupyter_path("nbgrader-a-2025"))
    assert "course-a-2025" not in kernels_seen(jupyter_path("nbgrader-b-2025"))
