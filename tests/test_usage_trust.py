"""A user's usage records charge only that user, in their own courses, under their own job ids.

The hub's records win: a user cannot claim a server's unit id, and a hub
record for a unit id a user claimed first takes the unit over. Files that
cannot be read are reported and never stop the others.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from coursehub.catalog.courses import create_course, create_portal, get_year
from coursehub.catalog.members import add_member
from coursehub.catalog.models.courses import Role
from coursehub.catalog.models.usage import UsageDay, UsageJournal, UsageUnit
from coursehub.catalog.seed import seed_demo
from coursehub.catalog.usage import ingest as catalog_usage
from coursehub.catalog.usage.ingest import ingest_folder, member_courses
from coursehub.catalog.usage.rollup import apply_records
from coursehub.catalog.usage.trust import (
    HUB,
    Writer,
    charged_course,
    file_writer,
    user_record_problem,
)
from coursehub.cli import main
from coursehub.meter.bounds import HostLimits
from coursehub.meter.records import UsageRecord, render_record

GiB = 2**30
HOST = HostLimits(cpus=2, mem_bytes=8 * GiB)
NOW = time.time()
SERVER_ID = f"server:deadbeef1234:bea::{int(NOW * 1000)}"


def rec(unit_id: str, user: str, course: str, kind: str = "job", **fields: object) -> UsageRecord:
    """A record of a unit that ran 90 s and ended 10 s ago, with ``fields`` changed."""
    values: dict[str, object] = {"cpu_s": 60.0, "mem_peak_bytes": 2**20}
    values.update(fields)
    event = str(values.pop("event", "close"))
    return UsageRecord(event, unit_id, kind, user, course, NOW - 10, NOW - 100, **values)  # type: ignore[arg-type]


ADA = Writer(hub=False, user="ada")


# ---- who wrote it: one place, from the opened file's owner and its folder


def test_a_file_of_root_or_of_this_process_in_the_hubs_folder_is_the_hubs():
    assert file_writer(0, hub_folder=True) == HUB
    assert file_writer(os.geteuid(), hub_folder=True) == HUB


def test_every_file_of_the_jobs_folder_is_its_owners_even_roots():
    assert file_writer(0, hub_folder=False) == Writer(hub=False, user=pwd.getpwuid(0).pw_name)


def test_a_file_whose_owner_has_no_account_is_nobodys():
    unknown = max(e.pw_uid for e in pwd.getpwall()) + 4242
    assert file_writer(unknown, hub_folder=False) == Writer(hub=False, user="")
    assert user_record_problem(rec("job:h:1", "", ""), Writer(hub=False)) is not None


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (rec("job:h:1", "p2500001", "alpha"), "names user 'p2500001' in a file of user 'ada'"),
        (rec(SERVER_ID, "ada", "alpha"), "is not a job id"),
        (rec("job:h:1", "ada", "alpha", kind="server"), "a server record in a file of user"),
        (rec("", "ada", "alpha"), "is not a job id"),
    ],
)
def test_a_user_writes_only_their_own_jobs_under_job_ids(record, message):
    problem = user_record_problem(record, ADA)
    assert problem is not None and message in problem


def test_the_hub_writes_any_record_and_a_user_their_own_job():
    assert user_record_problem(rec(SERVER_ID, "bea", "x", kind="server"), HUB) is None
    assert user_record_problem(rec("job:h:1", "ada", "alpha"), ADA) is None


def test_a_users_record_for_a_course_they_are_not_in_is_charged_to_no_course():
    course, why = charged_course(rec("job:h:1", "ada", "mlmeca-2025"), ADA, frozenset({"other"}))
    assert course == ""
    assert why == "user 'ada' is not in course 'mlmeca-2025': charged to no course"
    assert charged_course(rec("job:h:1", "ada", "other"), ADA, frozenset({"other"})) == (
        "other",
        None,
    )
    assert charged_course(rec("job:h:1", "ada", ""), ADA, frozenset()) == ("", None)
    assert charged_course(rec("s", "bea", "any", kind="server"), HUB, frozenset()) == ("any", None)


# ---- the catalog: membership, units


def _catalog(session, students: dict[str, str]) -> dict[str, str]:
    """The demo course and ``other-2025``; ``students`` maps a user to ``"demo"`` or ``"other"``."""
    demo = seed_demo(session)
    info = create_portal(session, "INFO", "Informatique")
    other = create_course(session, "OTHER", "Another", get_year(session, "2025-2026"), info)
    for user, where in students.items():
        add_member(session, demo if where == "demo" else other, user, Role.STUDENT)
    return {"demo": demo.course_id, "other": other.course_id}


def test_a_users_courses_are_those_they_study_or_teach_in(session):
    ids = _catalog(session, {"bea": "other"})
    found = member_courses(session, ["bea", "tdupont", "nobody"])
    assert found == {
        "bea": frozenset({ids["other"]}),
        "tdupont": frozenset({ids["demo"]}),  # a teacher of the demo course
        "nobody": frozenset(),
    }


def test_a_hub_record_takes_over_a_unit_id_a_user_claimed_first(session):
    squat = rec(SERVER_ID, "bea", "other-2025", event="open", cpu_s=0.0)
    assert apply_records(session, [squat], from_hub=False, limits=HOST) == 1
    server = rec(SERVER_ID, "bea", "other-2025", kind="server", cpu_s=9000.0, gpu_s=3600.0)
    assert apply_records(session, [server]) == 1
    (unit,) = session.query(UsageUnit).all()
    assert (unit.kind, unit.username, unit.cpu_s, unit.gpu_s, unit.from_hub) == (
        "server",
        "bea",
        9000.0,
        3600.0,
        True,
    )
    assert sum(d.cpu_s for d in session.query(UsageDay)) == 9000.0


def test_a_users_record_never_touches_a_unit_of_the_hub(session):
    apply_records(session, [rec("job:h:root1", "root", "", cpu_s=5.0)])  # a root job, the hub's
    forged = rec("job:h:root1", "root", "", cpu_s=100.0)
    assert apply_records(session, [forged], from_hub=False, limits=HOST) == 1
    units = {u.unit_id: (u.cpu_s, u.from_hub) for u in session.query(UsageUnit)}
    assert units == {"job:h:root1": (5.0, True), "job:h:root1#root": (100.0, False)}


def test_a_user_claiming_another_users_next_job_id_hides_nothing_of_it(session):
    squat = rec("job:h:slurm-1234", "mallory", "", event="open", cpu_s=0.0)
    assert apply_records(session, [squat], from_hub=False, limits=HOST) == 1
    theirs = [
        rec("job:h:slurm-1234", "ada", "alpha", event="sample", cpu_s=30.0),
        rec("job:h:slurm-1234", "ada", "alpha", cpu_s=60.0),
    ]
    assert apply_records(session, theirs, from_hub=False, limits=HOST) == 2
    units = {u.unit_id: (u.username, u.cpu_s) for u in session.query(UsageUnit)}
    assert units == {"job:h:slurm-1234": ("mallory", 0.0), "job:h:slurm-1234#ada": ("ada", 60.0)}
    assert {(d.username, d.cpu_s) for d in session.query(UsageDay)} == {
        ("mallory", 0.0),
        ("ada", 60.0),
    }


def test_a_users_unit_id_may_not_name_a_scoped_row():
    problem = user_record_problem(rec("job:h:slurm-1234#ada", "ada", ""), ADA)
    assert problem is not None and "holds '#'" in problem


def test_a_users_forged_counters_are_refused_and_the_hubs_are_not_bounded_by_this_host(session):
    refused: list[str] = []
    forged = rec("job:h:f1", "bea", "", cpu_s=3.6e9, gpu_s=3.6e8)
    assert apply_records(session, [forged], from_hub=False, limits=HOST, refused=refused) == 0
    assert "cpu_s 3.6e+09 is more than" in refused[0]
    big_hub = rec("server:h:bea::1", "bea", "", kind="server", cpu_s=9000.0)
    assert apply_records(session, [big_hub], limits=HOST) == 1  # the hub's host may be larger


def test_a_record_from_the_future_is_refused_even_from_the_hub(session):
    late = UsageRecord("sample", "server:h:x::1", "server", "x", "", NOW + 86400, NOW)
    refused: list[str] = []
    assert apply_records(session, [late], refused=refused, where="hub.jsonl") == 0
    assert "lies in the future" in refused[0]


# ---- files written by real Unix accounts (root: useradd, removed after)


@pytest.fixture
def accounts() -> Iterator[dict[str, int]]:
    """Two throwaway Unix accounts ``chtu<hex>a`` and ``chtu<hex>b``: name -> uid."""
    if os.geteuid() != 0:
        pytest.skip("needs root (useradd, chown)")
    tag = uuid.uuid4().hex[:6]
    names = [f"chtu{tag}a", f"chtu{tag}b"]
    made: dict[str, int] = {}
    try:
        for name in names:
            subprocess.run(["useradd", "--no-create-home", "--user-group", name], check=True)
            made[name] = pwd.getpwnam(name).pw_uid
        yield made
    finally:
        for name in names:
            subprocess.run(["userdel", name], check=False, capture_output=True)


def _write_as(path: Path, uid: int, *records: UsageRecord) -> Path:
    path.write_text("".join(render_record(r) for r in records))
    os.chown(path, uid, uid)
    os.chmod(path, 0o600)
    return path


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    hub, jobs = tmp_path / "usage", tmp_path / "usage-jobs"
    hub.mkdir(mode=0o700)
    jobs.mkdir()
    os.chmod(jobs, 0o1733)
    return hub, jobs


def test_a_student_of_one_course_cannot_charge_another_nor_squat_the_hubs_server(
    session, tmp_path, accounts
):
    bea, ana = accounts
    ids = _catalog(session, {bea: "other", ana: "demo"})
    hub, jobs = _folders(tmp_path)
    server_id = f"server:deadbeef1234:{bea}::{int(NOW * 1000)}"
    _write_as(
        jobs / "job-bea.jsonl",
        accounts[bea],
        rec("job:h:forged1", bea, ids["demo"], cpu_s=3.6e9, gpu_s=3.6e8),  # out of bounds
        rec("job:h:plain", bea, ids["demo"], event="sample", cpu_s=45.0),
        rec("job:h:plain", bea, ids["demo"], cpu_s=90.0),  # fits, but not bea's course
        rec("job:h:mine", bea, ids["other"], cpu_s=30.0),  # bea's own course
        rec("job:h:other", ana, ids["demo"], cpu_s=30.0),  # another's name
        rec(server_id, bea, ids["other"], event="open", cpu_s=0.0),  # the hub's next server
    )
    outcome = ingest_folder(session, jobs, hub_folder=False, limits=HOST)
    assert outcome.records == 3
    text = "\n".join(outcome.refused)
    assert "job:h:forged1: cpu_s 3.6e+09 is more than" in text
    assert (
        f"job:h:plain: user '{bea}' is not in course '{ids['demo']}': charged to no course" in text
    )
    assert text.count("job:h:plain:") == 1  # once for the unit, not for each of its records
    assert text.count("job:h:forged1:") == 1  # refused, so never "charged to no course"
    assert f"job:h:other: names user '{ana}'" in text
    assert f"{server_id}: unit id '{server_id}' is not a job id" in text

    _write_as(
        hub / "hub-1.jsonl", 0, rec(server_id, bea, ids["other"], kind="server", cpu_s=9000.0)
    )
    assert ingest_folder(session, hub, limits=HOST).records == 1
    units = {
        u.unit_id: (u.kind, u.username, u.course_id, u.cpu_s) for u in session.query(UsageUnit)
    }
    assert units == {
        "job:h:plain": ("job", bea, "", 90.0),
        "job:h:mine": ("job", bea, ids["other"], 30.0),
        server_id: ("server", bea, ids["other"], 9000.0),
    }
    days = {(d.course_id, d.username) for d in session.query(UsageDay)}
    assert (ids["demo"], bea) not in days


def test_bad_files_are_reported_and_skipped_and_the_others_ingested(session, tmp_path, accounts):
    bea, _ = accounts
    uid = accounts[bea]
    _, jobs = _folders(tmp_path)
    _write_as(jobs / "a-good.jsonl", uid, rec("job:h:good", bea, ""))
    with open(jobs / "b-huge.jsonl", "wb") as handle:
        handle.truncate(3 * 2**30)
    os.chown(jobs / "b-huge.jsonl", uid, uid)
    (jobs / "c-link.jsonl").symlink_to("/etc/passwd")
    os.lchown(jobs / "c-link.jsonl", uid, uid)
    os.mkfifo(jobs / "d-fifo.jsonl")
    other = _write_as(tmp_path / "someone.jsonl", uid, rec("job:h:linked", bea, ""))
    os.link(other, jobs / "e-hardlink.jsonl")
    _write_as(jobs / "f-good.jsonl", uid, rec("job:h:good2", bea, ""))

    outcome = ingest_folder(session, jobs, hub_folder=False, limits=HOST)
    assert outcome.records == 2
    assert {u.unit_id for u in session.query(UsageUnit)} == {"job:h:good", "job:h:good2"}
    reasons = sorted(outcome.refused)
    assert reasons[0].startswith("b-huge.jsonl: skipped: 3221225472 bytes, more than")
    assert reasons[1] == "c-link.jsonl: skipped: a symbolic link, not followed"
    assert reasons[2] == "d-fifo.jsonl: skipped: not a regular file"
    assert reasons[3] == "e-hardlink.jsonl: skipped: a file with 2 hard links"
    assert "root:" not in "\n".join(outcome.refused)  # nothing of the link's target is echoed


def test_one_file_failing_to_apply_rolls_back_only_itself(session, tmp_path, monkeypatch):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.jsonl").write_text(render_record(rec(f"job:h:{name}", "root", "")))
    applied = catalog_usage.apply_records

    def failing(session, records, **kwargs):
        if kwargs.get("where") == "b.jsonl":
            session.add(UsageUnit(unit_id="half", kind="job", username="x", course_id=""))
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        return applied(session, records, **kwargs)

    monkeypatch.setattr(catalog_usage, "apply_records", failing)
    outcome = ingest_folder(session, tmp_path, limits=HOST)
    assert outcome.records == 2
    assert outcome.refused[0].startswith("b.jsonl: skipped: ")
    assert {u.unit_id for u in session.query(UsageUnit)} == {"job:h:a", "job:h:c"}
    marks = {Path(m.path).name for m in session.query(UsageJournal)}
    assert marks == {"a.jsonl", "c.jsonl"}  # b is read again next time


def test_a_hub_folder_others_may_write_to_holds_no_hub_records(session, tmp_path):
    os.chmod(tmp_path, 0o777)
    (tmp_path / "hub.jsonl").write_text(
        render_record(rec("server:h:bea::1", "bea", "", kind="server"))
    )
    outcome = ingest_folder(session, tmp_path, limits=HOST)
    assert outcome.records == 0
    assert outcome.refused[0] == f"{tmp_path}: writable by others: its files are read as users'"
    assert "users write jobs only" in outcome.refused[1] or "names user" in outcome.refused[1]


def test_the_ingest_command_survives_a_huge_file_and_reports_it(database_url, tmp_path, capsys):
    hub, jobs = tmp_path / "usage", tmp_path / "usage-jobs"
    hub.mkdir(mode=0o700)
    jobs.mkdir()
    (hub / "hub-1.jsonl").write_text(
        render_record(rec("server:h:bea::1", "bea", "", kind="server"))
    )
    with open(jobs / "zzz.jsonl", "wb") as handle:
        handle.truncate(3 * 2**30)
    argv = ["usage", "ingest", str(hub), "--database-url", database_url, "--cpus", "2"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "1 usage records read" in out.out
    assert "refused: zzz.jsonl: skipped: 3221225472 bytes" in out.err


def test_the_ingest_command_refuses_a_host_of_no_cpus(database_url, tmp_path, capsys):
    argv = ["usage", "ingest", str(tmp_path), "--database-url", database_url, "--cpus", "0"]
    assert main(argv) == 2
    assert "--cpus must be more than 0" in capsys.readouterr().err


def test_a_newline_in_a_file_name_or_unit_id_cannot_forge_a_report_line(session, tmp_path):
    name = "a\nrefused: fake.jsonl"
    forged = rec("job:h:1\nrefused: fake", "nobody-here", "", kind="server")
    (tmp_path / name).write_text(render_record(forged))
    os.chmod(tmp_path, 0o777)  # others may write: the file is read as its owner's
    outcome = ingest_folder(session, tmp_path, limits=HOST)
    assert outcome.records == 0 and len(outcome.refused) == 2
    assert all("\n" not in line for line in outcome.refused)
    assert outcome.refused[1].startswith("'a\\nrefused: fake.jsonl': 'job:h:1\\nrefused: fake': ")
