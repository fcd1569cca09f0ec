"""Shared course data and course spaces: the pure plans, from tables."""

from __future__ import annotations

import pytest

from coursehub.coursedata.folders import (
    MAX_GROUP_NAME,
    plan_course_data,
    render_acl,
    unix_group_name,
)
from coursehub.courselayout import check_shared_root, data_dir, jupyter_data_dir
from coursehub.errors import UsageError
from coursehub.spawn.coursespaces import (
    plan_bind_paths,
    plan_course_roles,
    plan_jupyter_path,
    plan_kube_mounts,
    render_slurm_prologue,
)

ROOT = "/srv/coursehub"


@pytest.mark.parametrize(
    ("course_id", "role", "expected"),
    [
        ("mlmeca-2025", "team", "cht-mlmeca-2025"),
        ("mlmeca-2025", "students", "chs-mlmeca-2025"),
    ],
)
def test_a_course_gets_one_unix_group_per_side(course_id, role, expected):
    assert unix_group_name(course_id, role) == expected


def test_a_long_course_id_gets_a_short_distinct_group_name():
    a = unix_group_name("a-very-long-course-code-for-a-test-2025", "team")
    b = unix_group_name("a-very-long-course-code-for-a-test-2026", "team")
    assert len(a) <= MAX_GROUP_NAME and len(b) <= MAX_GROUP_NAME
    assert a != b


@pytest.mark.parametrize("course_id", ["../etc", "A-2025", "", "x/y", "x y"])
def test_a_course_id_that_is_not_one_path_component_is_refused(course_id):
    with pytest.raises(UsageError, match="not a course id"):
        data_dir(ROOT, course_id)


@pytest.mark.parametrize("root", ["relative/path", "/srv/with space"])
def test_a_shared_root_must_be_absolute_without_spaces(root):
    with pytest.raises(UsageError, match="shared root"):
        check_shared_root(root)


def test_the_acl_gives_the_team_write_the_students_read_and_others_nothing():
    entries = render_acl("cht-x", "chs-x").split(",")
    for prefix in ("", "d:"):
        assert f"{prefix}g:cht-x:rwx" in entries
        assert f"{prefix}g:chs-x:r-x" in entries
        assert f"{prefix}o::---" in entries


def test_the_plan_leaves_out_accounts_that_do_not_exist_and_a_team_member_is_not_a_student():
    plan = plan_course_data("c-2025", ["t1", "t2"], ["s1", "t1", "ghost"], lambda u: u != "ghost")
    assert plan.team == ("t1", "t2")
    assert plan.students == ("s1",)
    assert plan.missing == ("ghost",)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        (["nbgrader-a-2025", "other"], {"a-2025": "students"}),
        (["nbgrader-a-2025", "formgrade-a-2025"], {"a-2025": "team"}),
        (
            ["formgrade-a-2025", "nbgrader-a-2025", "nbgrader-b-2025"],
            {"a-2025": "team", "b-2025": "students"},
        ),
        (["nbgrader-../x", "nbgrader-"], {}),
    ],
)
def test_course_roles_come_from_the_hub_groups(groups, expected):
    assert plan_course_roles(groups) == expected


def test_jupyter_path_lists_the_users_courses_then_the_admins_value():
    value = plan_jupyter_path(ROOT, ["a-2025", "b-2025"], "/opt/jupyter")
    assert value.split(":") == [
        str(jupyter_data_dir(ROOT, "a-2025")),
        str(jupyter_data_dir(ROOT, "b-2025")),
        "/opt/jupyter",
    ]


def test_systemd_binds_the_folder_read_only_for_students_and_read_write_for_the_team():
    props = plan_bind_paths(ROOT, {"a-2025": "team", "b-2025": "students"}, "/home/u", {})
    assert props == {
        "BindPaths": f"{ROOT}/courses/a-2025/data:/home/u/a-2025-data",
        "BindReadOnlyPaths": f"{ROOT}/courses/b-2025/data:/home/u/b-2025-data",
    }


def test_systemd_keeps_the_admins_own_bind_paths_first():
    props = plan_bind_paths(
        ROOT, {"b-2025": "students"}, "/home/u", {"BindReadOnlyPaths": "/opt:/opt"}
    )
    assert props["BindReadOnlyPaths"].split(" ")[0] == "/opt:/opt"
    assert "BindPaths" not in props


def test_kubernetes_mounts_the_data_subpath_read_only_for_students():
    volumes, mounts = plan_kube_mounts(ROOT, {"b-2025": "students"}, "/home/jovyan", "claim")
    assert volumes == [
        {"name": "coursehub-shared", "persistentVolumeClaim": {"claimName": "claim"}}
    ]
    data = mounts[0]
    assert data["mountPath"] == "/home/jovyan/b-2025-data"
    assert data["subPath"] == "courses/b-2025/data"
    assert data["readOnly"] is True
    assert all(m["readOnly"] for m in mounts[1:])


def test_kubernetes_mounts_nothing_for_a_user_in_no_course():
    assert plan_kube_mounts(ROOT, {}, "/home/jovyan", "claim") == ([], [])


def test_the_slurm_prologue_links_the_folder_without_replacing_a_students_file():
    text = render_slurm_prologue(ROOT, {"a-2025": "students"}, "module load python")
    lines = text.splitlines()
    assert lines[0] == "module load python"
    assert lines[1] == (
        '[ -e "$HOME"/a-2025-data ] || [ -L "$HOME"/a-2025-data ] || '
        f'ln -s {ROOT}/courses/a-2025/data "$HOME"/a-2025-data'
    )
