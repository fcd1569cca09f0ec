"""A course without a declared list builds from the ``requirements.txt`` of its material."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from coursehub.courseenv.build import build_environment
from coursehub.courseenv.layout import env_paths, read_state
from coursehub.courseenv.requirements import material_requirements
from coursehub.errors import UsageError
from coursehub.material.credential import parse_credential, store_credential
from coursehub.material.layout import MaterialLayout
from coursehub.material.mirror import update_mirror
from coursehub.material.mirrortypes import MirrorSource
from material_gitserver import allow_loopback, serve_git, teacher_repo


def publish(tmp_path: Path, course_id: str, files: dict[str, str]) -> MaterialLayout:
    layout = MaterialLayout(tmp_path / "material").ensure()
    server = tmp_path / "server"
    server.mkdir()
    token = secrets.token_hex(8)
    teacher_repo(server, course_id, files)
    store_credential(layout, course_id, parse_credential(f"deploy:{token}".encode(), "t"))
    with allow_loopback(), serve_git(server, "deploy", token) as base:
        source = MirrorSource(course_id, f"{base}/{course_id}.git", "main", "notebooks", "token")
        update_mirror(layout, source)
    return layout


def test_the_requirements_txt_at_the_root_of_the_materials_folder_is_read(tmp_path):
    layout = publish(
        tmp_path,
        "a-2025",
        {"notebooks/requirements.txt": "six\n", "requirements.txt": "numpy\n"},
    )
    found = material_requirements(layout, "a-2025")
    assert found is not None
    text, where = found
    assert text == "six\n"  # the sub-folder's file, not the repository's
    assert where.startswith("requirements.txt of a-2025's material (commit ")


def test_a_material_without_requirements_txt_or_no_material_gives_none(tmp_path):
    layout = publish(tmp_path, "a-2025", {"notebooks/tp1.py": "print(1)\n"})
    assert material_requirements(layout, "a-2025") is None
    assert material_requirements(layout, "b-2025") is None


def test_a_refused_line_of_the_materials_requirements_is_named_and_nothing_is_built(tmp_path):
    where = "requirements.txt of a-2025's material (commit 0123456789ab)"
    with pytest.raises(UsageError, match=r"a-2025's material .* line 2: pip options"):
        build_environment(tmp_path, "a-2025", material=("six\n--index-url http://x/\n", where))
    paths = env_paths(tmp_path, "a-2025")
    assert not paths.builds.exists() and not paths.material_requirements.exists()


def test_no_declared_list_and_no_material_tells_both_ways(tmp_path):
    with pytest.raises(UsageError, match=r"env set a-2025.*requirements\.txt at the root"):
        build_environment(tmp_path, "a-2025")


@pytest.mark.slow
def test_a_course_without_a_declared_list_builds_from_its_materials_requirements(
    tmp_path, open_tmp
):
    layout = publish(tmp_path, "a-2025", {"notebooks/requirements.txt": "six\n"})
    shared = open_tmp / "shared"  # the sandbox account enters the build folder as root
    state = build_environment(shared, "a-2025", material=material_requirements(layout, "a-2025"))
    assert state["status"] == "ok"
    assert state["requirements"] == ["six"]
    assert "a-2025's material" in read_state(env_paths(shared, "a-2025"))["requirements_from"]
