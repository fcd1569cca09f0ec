"""Usage records, usage files, ingestion into the catalog and the report's three groupings."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, date, datetime

import pytest

from coursehub.catalog.models.usage import UsageDay, UsageUnit
from coursehub.catalog.usage.ingest import ingest_folder, prune_usage
from coursehub.catalog.usage.rollup import apply_records
from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.meter.journal import append_record, list_journals, read_records
from coursehub.meter.records import RecordError, UsageRecord, parse_record, render_record
from coursehub.usage.report import parse_since, usage_report

DAY1 = datetime(2026, 9, 14, 10, tzinfo=UTC).timestamp()
DAY2 = datetime(2026, 9, 15, 10, tzinfo=UTC).timestamp()


def rec(event, unit, user, course, at, cpu_s, peak=0, kind="server", started=None):
    return UsageRecord(event, unit, kind, user, course, at, started or at, cpu_s, peak)


#: (records, ...) of two courses, two students, two days; figures chosen to be checked by hand.
RECORDS = [
    rec("open", "s1", "ada", "alpha", DAY1, 0.0),
    rec("sample", "s1", "ada", "alpha", DAY1 + 3600, 3600.0, 2**30, started=DAY1),
    rec("close", "s1", "ada", "alpha", DAY2, 7200.0, 2**29, started=DAY1),
    rec("close", "j1", "bob", "alpha", DAY2, 1800.0, 2**20, kind="job", started=DAY2 - 1800),
    rec("close", "j2", "ada", "beta", DAY2, 360.0, 0, kind="job", started=DAY2 - 360),
]

BAD_LINES = [
    ("not json", "not JSON"),
    ("[1]", "not a JSON object"),
    ('{"event": "open"}', "missing field"),
    (render_record(rec("stop", "u", "a", "c", 1.0, 0.0)), "event must be"),
    (
        render_record(rec("open", "u", "a", "c", 1.0, 0.0)).replace('"cpu_s": 0.0', '"cpu_s": -1'),
        "not negative",
    ),
    (
        render_record(rec("open", "u", "a", "c", 1.0, 0.0)).replace('"user": "a"', '"user": 3'),
        "must be text",
    ),
    ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
    ('{"a": ' * 30_000 + "1" + "}" * 30_000, "nested too deeply"),
    (
        render_record(rec("open", "u", "a", "c", 1.0, 0.0)).replace(
            '"mem_peak_bytes": 0', '"mem_peak_bytes": 1e30'
        ),
        "must be at most",
    ),
]


def test_a_record_survives_its_json_line():
    record = RECORDS[1]
    line = render_record(record)
    assert line.endswith("\n") and line.count("\n") == 1
    assert parse_record(line) == record


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_a_line_that_is_not_a_record_is_refused_with_its_reason(line, message):
    with pytest.raises(RecordError, match=message):
        parse_record(line)


def test_an_unfinished_last_line_waits_until_it_is_complete(tmp_path):
    path = append_record(tmp_path, "hub1", RECORDS[0])
    with open(path, "a") as handle:
        handle.write(render_record(RECORDS[1])[:20])
    batch = read_records(path)
    assert batch.records == [RECORDS[0]]
    assert batch.offset == len(render_record(RECORDS[0]))
    with open(path, "a") as handle:
        handle.write(render_record(RECORDS[1])[20:])
    assert read_records(path, batch.offset).records == [RECORDS[1]]


def test_usage_files_are_private(tmp_path):
    path = append_record(tmp_path / "usage", "hub1", RECORDS[0])
    assert path.stat().st_mode & 0o077 == 0
    assert (tmp_path / "usage").stat().st_mode & 0o077 == 0


def test_the_rollup_adds_each_increase_to_the_day_of_its_record(session):
    apply_records(session, RECORDS)
    days = {(d.course_id, d.day, d.username): d for d in session.query(UsageDay)}
    assert days[("alpha", date(2026, 9, 14), "ada")].cpu_s == 3600.0
    assert days[("alpha", date(2026, 9, 15), "ada")].cpu_s == 3600.0
    assert days[("alpha", date(2026, 9, 14), "ada")].units == 1
    assert days[("alpha", date(2026, 9, 15), "ada")].units == 0
    assert days[("alpha", date(2026, 9, 14), "ada")].mem_peak_bytes == 2**30
    unit = session.query(UsageUnit).filter_by(unit_id="s1").one()
    assert (unit.cpu_s, unit.mem_peak_bytes, unit.exit_reason) == (7200.0, 2**30, "")
    assert unit.ended_at == datetime.fromtimestamp(DAY2, UTC)


def test_ingesting_twice_applies_each_record_once(session, tmp_path):
    for record in RECORDS:
        append_record(tmp_path, "hub1", record)
    assert ingest_folder(session, tmp_path).records == len(RECORDS)
    assert ingest_folder(session, tmp_path).records == 0
    assert sum(d.cpu_s for d in session.query(UsageDay)) == 7200.0 + 1800.0 + 360.0


def test_a_bad_line_is_refused_and_the_rest_is_read(session, tmp_path):
    append_record(tmp_path, "hub1", RECORDS[0])
    path = list_journals(tmp_path)[0]
    with open(path, "a") as handle:
        handle.write("garbage\n")
    append_record(tmp_path, "hub1", RECORDS[1])
    outcome = ingest_folder(session, tmp_path)
    assert outcome.records == 2
    assert len(outcome.refused) == 1 and "not JSON" in outcome.refused[0]


def test_the_report_groups_by_student(session):
    apply_records(session, RECORDS)
    rows = usage_report(session, "alpha", by="student")
    assert [(r.username, r.cpu_hours, r.mem_peak_mib, r.units) for r in rows] == [
        ("ada", 2.0, 1024.0, 1),
        ("bob", 0.5, 1.0, 1),
    ]


def test_the_report_groups_by_day(session):
    apply_records(session, RECORDS)
    rows = usage_report(session, by="day")
    assert [(r.day, r.cpu_hours) for r in rows] == [("2026-09-14", 1.0), ("2026-09-15", 1.6)]
    assert [r.day for r in usage_report(session, by="day", since=date(2026, 9, 15))] == [
        "2026-09-15"
    ]


def test_the_report_groups_by_course(session):
    apply_records(session, RECORDS)
    rows = usage_report(session, by="course")
    assert [(r.course_id, r.cpu_hours, r.units) for r in rows] == [
        ("alpha", 2.5, 2),
        ("beta", 0.1, 1),
    ]


def test_an_unknown_grouping_or_date_is_a_clear_error(session):
    with pytest.raises(UsageError, match="--by must be one of student, day, course"):
        usage_report(session, by="week")
    with pytest.raises(UsageError, match="--since must be a date like 2026-09-01"):
        parse_since("14/09/2026")


def test_the_retention_keeps_recent_rows_and_drops_old_ones(session):
    apply_records(session, RECORDS)
    assert prune_usage(session, now=datetime(2027, 1, 1, tzinfo=UTC)) == 0
    assert prune_usage(session, now=datetime(2032, 1, 1, tzinfo=UTC)) == 3 + 4  # units + days
    assert session.query(UsageUnit).count() == session.query(UsageDay).count() == 0


def test_the_command_ingests_and_reports_as_csv_and_json(database_url, tmp_path, capsys):
    for record in RECORDS:
        append_record(tmp_path, "hub1", record)
    assert main(["usage", "ingest", str(tmp_path), "--database-url", database_url]) == 0
    assert "5 usage records read" in capsys.readouterr().out
    base = ["usage", "report", "alpha", "--database-url", database_url]
    assert main([*base, "--csv"]) == 0
    lines = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert lines[0] == ["course_id", "username", "cpu_hours", "gpu_hours", "mem_peak_mib", "units"]
    assert lines[1][:3] == ["alpha", "ada", "2.0"]
    assert main([*base, "--by", "course", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["cpu_hours"] == 2.5


def test_the_command_names_a_missing_folder_and_a_bad_date(database_url, tmp_path, capsys):
    assert main(["usage", "ingest", str(tmp_path / "nope"), "--database-url", database_url]) == 2
    assert "usage folder" in capsys.readouterr().err
    assert main(["usage", "report", "--since", "soon", "--database-url", database_url]) == 2
    assert "--since must be a date" in capsys.readouterr().err
