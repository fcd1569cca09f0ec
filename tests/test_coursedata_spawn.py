"""Course spaces at spawn time, against the real spawner classes: data folder and kernels path."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from coursehub.contract import make_profile
from coursehub.courselayout import data_dir, jupyter_data_dir
from coursehub.spawn.coursespaces import CourseSpaces, apply_data_links
from coursehub.spawn.profiles import spawner_override
from coursehub.spawn.spawner import apply_override
from helpers import local_spawner
from test_spawner_classes import make_spawner

ROOT = "/srv/coursehub"
PROFILE = make_profile("m2", cpu_limit=1, mem_limit="2G", n_threads=1)


def groups(*names):
    return [SimpleNamespace(name=n, properties={}) for n in names]


def spawner_for(tmp_path, *group_names):
    return local_spawner(group_names, home=tmp_path / "homes")


def shared_root(tmp_path, *course_ids):
    """A shared root holding the data folders of ``course_ids``."""
    root = tmp_path / "shared"
    for course_id in course_ids:
        data_dir(root, course_id).mkdir(parents=True)
    return str(root)


def test_a_local_server_gets_a_link_to_each_of_its_courses_data_folder(tmp_path):
    root = shared_root(tmp_path, "a-2025", "b-2025")
    spawner = spawner_for(tmp_path, "nbgrader-a-2025", "formgrade-b-2025", "other")
    CourseSpaces("local", root=root)(spawner)
    home = tmp_path / "homes" / "alice"
    assert os.readlink(home / "a-2025-data") == str(data_dir(root, "a-2025"))
    assert os.readlink(home / "b-2025-data") == str(data_dir(root, "b-2025"))
    assert spawner.environment["JUPYTER_PATH"].split(":") == [
        str(jupyter_data_dir(root, "a-2025")),
        str(jupyter_data_dir(root, "b-2025")),
    ]


def test_a_course_without_its_data_folder_gets_no_dangling_link(tmp_path):
    root = shared_root(tmp_path, "a-2025")
    home = tmp_path / "home"
    home.mkdir()
    apply_data_links(home, root, {"a-2025": "students", "b-2025": "students"})
    assert os.path.isdir(home / "a-2025-data")
    assert not os.path.lexists(home / "b-2025-data")
    (home / "b-2025-data").symlink_to(data_dir(root, "b-2025"))  # made before it went
    apply_data_links(home, root, {"b-2025": "students"})
    assert not os.path.lexists(home / "b-2025-data")


def test_leaving_a_course_removes_its_link_and_kernel_path_at_the_next_start(tmp_path):
    root = shared_root(tmp_path, "a-2025", "b-2025")
    spawner = spawner_for(tmp_path, "nbgrader-a-2025", "nbgrader-b-2025")
    spaces = CourseSpaces("local", root=root)
    spaces(spawner)
    spawner.user.groups = groups("nbgrader-b-2025")
    apply_override(spawner, spawner_override(PROFILE, "local", []))  # the profile hook runs first
    spaces(spawner)
    home = tmp_path / "homes" / "alice"
    assert not os.path.lexists(home / "a-2025-data")
    assert os.path.islink(home / "b-2025-data")
    assert "a-2025" not in spawner.environment["JUPYTER_PATH"]


def test_a_students_own_file_named_like_the_link_is_left_alone(tmp_path):
    home = tmp_path / "home"
    (home / "a-2025-data").mkdir(parents=True)
    (home / "a-2025-data" / "mine.txt").write_text("mine")
    apply_data_links(home, ROOT, {"a-2025": "students"})
    assert (home / "a-2025-data" / "mine.txt").read_text() == "mine"


def test_a_home_replaced_by_a_symlink_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        apply_data_links(tmp_path / "home", ROOT, {"a-2025": "students"})
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_systemd_binds_the_data_folder_into_the_unit_and_keeps_the_profiles_properties():
    spawner = make_spawner("systemd")
    spawner.user.groups = groups("nbgrader-a-2025")
    spawner.unit_extra_properties = {"DeviceAllow": "/dev/null rw"}
    CourseSpaces("systemd", root=ROOT)(spawner)
    props = spawner.unit_extra_properties
    assert props["DeviceAllow"] == "/dev/null rw"
    assert props["BindReadOnlyPaths"] == f"{ROOT}/courses/a-2025/data:/home/alice/a-2025-data"
    assert "BindPaths" not in props


def test_slurm_jobs_link_the_folder_themselves_after_the_admins_prologue():
    spawner = make_spawner("slurm")
    spawner.req_prologue = "module load python"
    spawner.user.groups = groups("formgrade-a-2025")
    spaces = CourseSpaces("slurm", root=ROOT)
    spaces(spawner)
    spaces(spawner)  # a second start does not repeat the lines
    lines = spawner.req_prologue.splitlines()
    assert lines[0] == "module load python"
    assert len(lines) == 2 and "ln -s /srv/coursehub/courses/a-2025/data" in lines[1]


def test_kubernetes_pods_mount_the_shared_volume_read_only_for_students():
    spawner = make_spawner("kubernetes")
    spawner.user.groups = groups("nbgrader-a-2025")
    CourseSpaces("kubernetes", root=ROOT, claim_name="shared")(spawner)
    assert spawner.volumes == [
        {"name": "coursehub-shared", "persistentVolumeClaim": {"claimName": "shared"}}
    ]
    data = spawner.volume_mounts[0]
    assert (data["mountPath"], data["readOnly"]) == ("/home/jovyan/a-2025-data", True)
