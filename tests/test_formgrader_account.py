"""A course's formgrader account: its name carries the hub's id, its group follows the site's."""

from __future__ import annotations

import grp
import subprocess
import uuid

import pytest

from coursehub.errors import CoursehubError
from coursehub.grading.formgrader.account import (
    MAX_USER_NAME,
    ensure_formgrader_account,
    formgrader_user_name,
    grading_group_name,
)
from coursehub.grading.layout import make_layout


@pytest.mark.parametrize(
    ("course_id", "expected"),
    [
        ("mlmeca-2025", "fg-0123456789-mlmeca-2025"),
        ("a-very-long-course-id-2025", "fg-0123456789-"),  # hashed: too long for useradd
        ("MLMECA.2025", "fg-0123456789-"),  # not a Unix name: hashed
    ],
)
def test_the_account_name_carries_the_hub_id_and_fits_useradd(course_id, expected):
    name = formgrader_user_name(course_id, "0123456789")
    assert name.startswith(expected) and len(name) <= MAX_USER_NAME
    assert formgrader_user_name(course_id, "9876543210") != name  # another hub, another account


def test_the_group_is_the_sites_team_group_else_the_accounts_own():
    assert grading_group_name("c1", "fg-x-c1", {}) == "fg-x-c1"  # no formgrade-c1 group here
    assert grading_group_name("c1", "fg-x-c1", {"COURSEHUB_GRADING_GROUP": "root"}) == "root"
    with pytest.raises(CoursehubError, match="owner-only"):
        grading_group_name("c1", "fg-x-c1", {"COURSEHUB_GRADING_GROUP": "none"})


@pytest.mark.root
def test_an_account_follows_the_team_group_a_site_gives_the_course_later(tmp_path):
    hub_id = uuid.uuid4().hex[:10]
    team = f"chtest-team-{uuid.uuid4().hex[:6]}"
    layout = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange")
    name = formgrader_user_name("phys-2025", hub_id)
    try:
        first = ensure_formgrader_account(layout, hub_id, {})
        assert grp.getgrgid(first.gid).gr_name == name
        subprocess.run(["groupadd", "--system", team], check=True)
        moved = ensure_formgrader_account(layout, hub_id, {"COURSEHUB_GRADING_GROUP": team})
        assert (moved.uid, grp.getgrgid(moved.gid).gr_name) == (first.uid, team)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        for group in (name, team):
            subprocess.run(["groupdel", group], check=False, capture_output=True)
