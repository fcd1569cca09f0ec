"""Home quotas in the catalog: course, portal, department default; ``coursehub home``."""

from __future__ import annotations

import subprocess

import pytest

from coursehub.catalog.courses import create_course, create_portal, get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.members import add_member
from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.homequota.plan import department_default, most_generous, parse_quota
from coursehub.homequota.reading import read_btrfs_usage
from loopfs import loop_mount

G = 2**30


@pytest.fixture
def catalog(database_url, tmp_path, monkeypatch):
    """The seeded catalog: mlmeca-2025 (portal MECA), students p2500001 to p2500004."""
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.delenv("COURSEHUB_HOME_QUOTA", raising=False)
    assert main(["db", "seed", "--database-url", database_url]) == 0
    return database_url


def home(capsys, url, *argv):
    status = main(["home", *argv, "--database-url", url])
    out, err = capsys.readouterr()
    return status, out, err


def plan(capsys, url, *argv):
    status, out, _ = home(capsys, url, "plan", *argv)
    assert status == 0
    return dict(line.split("\t") for line in out.splitlines())


def test_sizes_are_bytes_and_none_is_no_limit():
    assert parse_quota("2G") == 2 * G
    assert parse_quota("none") is None and parse_quota("") is None
    with pytest.raises(UsageError, match="SIZE: memory size must be"):
        parse_quota("lots", "SIZE")
    assert department_default({"COURSEHUB_HOME_QUOTA": "500M"}) == 500 * 2**20
    assert department_default({}) is None


def test_no_limit_beats_any_size_and_the_largest_size_wins():
    assert most_generous([G, 3 * G]) == 3 * G
    assert most_generous([G, None]) is None


def test_the_course_beats_the_portal_which_beats_the_department_default(catalog, capsys):
    assert set(plan(capsys, catalog).values()) == {"no limit"}
    assert set(plan(capsys, catalog, "--default", "2G").values()) == {"2G"}
    assert home(capsys, catalog, "quota", "--portal", "MECA", "1G")[1] == "MECA: home quota 1G\n"
    assert plan(capsys, catalog, "--default", "2G")["p2500001"] == "1G"
    assert home(capsys, catalog, "quota", "--course", "mlmeca-2025", "3G")[0] == 0
    assert plan(capsys, catalog, "--default", "2G")["p2500001"] == "3G"
    assert home(capsys, catalog, "quota", "--course", "mlmeca-2025", "none")[0] == 0
    assert plan(capsys, catalog)["p2500001"] == "1G"


def test_a_student_in_two_courses_gets_the_more_generous_quota(catalog, capsys):
    engine = make_engine(catalog)
    with session_scope(engine) as session:
        year = get_course(session, "mlmeca-2025").year
        numflu = create_course(
            session, "NUMFLU", "Fluides", year, create_portal(session, "MATH", "Maths")
        )
        add_member(session, numflu, "p2500001", "student")
    engine.dispose()
    home(capsys, catalog, "quota", "--portal", "MECA", "1G")
    home(capsys, catalog, "quota", "--portal", "MATH", "5G")
    quotas = plan(capsys, catalog)
    assert quotas["p2500001"] == "5G" and quotas["p2500002"] == "1G"


def test_a_bad_size_is_one_line_and_changes_nothing(catalog, capsys):
    status, _, err = home(capsys, catalog, "quota", "--course", "mlmeca-2025", "0")
    assert status != 0
    assert err.strip().splitlines() == [
        "coursehub: error: SIZE: memory size must be at least 1 byte, got '0'"
    ]
    assert set(plan(capsys, catalog).values()) == {"no limit"}


def test_apply_on_a_file_system_without_quotas_says_why_for_each_home(catalog, capsys, tmp_path):
    (tmp_path / "homes" / "p2500001").mkdir(parents=True)
    status, out, _ = home(capsys, catalog, "apply", str(tmp_path / "homes"), "--default", "1G")
    assert status == 1
    lines = dict(line.split("\t", 1) for line in out.splitlines())
    assert lines["p2500001"].startswith(
        f"not set: no quota for {tmp_path / 'homes' / 'p2500001'}: "
    )
    assert lines["p2500002"] == f"no home at {tmp_path / 'homes' / 'p2500002'} yet"


@pytest.mark.root
def test_apply_sets_each_students_quota_on_btrfs_home_subvolumes(catalog, capsys, tmp_path):
    with loop_mount(tmp_path, 160, "btrfs") as disk:
        subprocess.run(["btrfs", "quota", "enable", str(disk)], check=True, capture_output=True)
        for user in ("p2500001", "p2500002"):
            subprocess.run(
                ["btrfs", "subvolume", "create", str(disk / user)], check=True, capture_output=True
            )
        home(capsys, catalog, "quota", "--portal", "MECA", "64M")
        status, out, _ = home(capsys, catalog, "apply", str(disk))
        assert status == 0, out
        assert "p2500001\t64M\tbtrfs-qgroup" in out.splitlines()
        assert read_btrfs_usage(str(disk / "p2500002"))[1] == 64 * 2**20
        assert main(["home", "detect", str(disk / "p2500001")]) == 0
        assert capsys.readouterr().out == f"{disk / 'p2500001'}: btrfs-qgroup on {disk}\n"
