"""At the bell: a student's saved exam work is submitted with a receipt; late ones are refused.

Real nbgrader (release, fetch, submit, collect on a real exchange, one Unix
user as in the demo) and a real catalog; the commands through ``coursehub
exam`` with the grading folders of ``COURSEHUB_GRADING_*``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest

from coursehub.catalog.exams import create_exam, record_receipt, sitting_of, start_exam
from coursehub.catalog.examtime import Allowance, Window
from coursehub.catalog.seed import seed_demo
from coursehub.cli import main
from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    release_assignment,
)
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.examcollect import collect_exam
from coursehub.grading.examsubmit import (
    LateExamSubmissionError,
    manifest_sha256,
    submit_exam,
    verify_collected,
)
from coursehub.grading.exchange import fetch_assignment, submit_assignment
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout

EXAM = "final"
NB = f"{DEMO_ASSIGNMENT}.ipynb"
COURSE = "mlmeca-2025"


def released_exam(root: Path) -> CourseLayout:
    layout = make_layout(COURSE, root / "courses", root / "exchange", single_user=True)
    ensure_course(layout)
    add_assignment(layout, EXAM, [demo_source_dir() / NB])
    generate_assignment(layout, EXAM)
    release_assignment(layout, EXAM)
    return layout


def write_answer(layout: CourseLayout, student: str, home: Path, text: str) -> Path:
    """Fetch (once) as ``student`` and save ``text`` in the notebook; return the notebook."""
    folder = home / COURSE / EXAM
    if not folder.is_dir():
        fetch_assignment(layout.exchange_root, COURSE, EXAM, student, home)
    notebook = nbformat.read(folder / NB, as_version=4)
    notebook.cells[0].source += f"\n# {text}"
    nbformat.write(notebook, folder / NB)
    return folder / NB


def inbound_of(layout: CourseLayout, student: str) -> list[Path]:
    return sorted((layout.exchange_root / COURSE / "inbound").glob(f"{student}+{EXAM}+*"))


@pytest.fixture
def sitting(session, tmp_path):
    """The demo course, its exam ``final`` opened an hour ago for 60 min, p2500001 started."""
    layout = released_exam(tmp_path)
    course = seed_demo(session)
    now = datetime.now(UTC)
    window = Window(now - timedelta(hours=1), 60, now + timedelta(hours=2), "Europe/Paris")
    exam = create_exam(session, course, EXAM, window, "mbuffat")
    start_exam(session, course, exam, "p2500001", now - timedelta(minutes=30))
    return layout, course, exam


def test_a_submission_in_time_gets_a_receipt_that_matches_the_stored_and_collected_file(
    session, sitting, tmp_path
):
    layout, course, exam = sitting
    home = tmp_path / "home"
    notebook = write_answer(layout, "p2500001", home, "my answer")
    current = sitting_of(session, course, exam, "p2500001")
    receipt = submit_exam(layout, EXAM, current, home, datetime.now(UTC), exam.timezone)
    [stored] = inbound_of(layout, "p2500001")
    assert receipt.submission == stored.name
    digest = hashlib.sha256((stored / NB).read_bytes()).hexdigest()
    assert receipt.files == {NB: digest}
    assert digest == hashlib.sha256(notebook.read_bytes()).hexdigest()
    assert receipt.sha256 == manifest_sha256({NB: digest})
    assert receipt.sha256 == hashlib.sha256(f"{digest}  {NB}\n".encode()).hexdigest()
    record_receipt(session, course, exam, "p2500001", receipt, final=False)
    session.commit()
    kept = sitting_of(session, course, exam, "p2500001")
    assert (kept.receipt_sha256, kept.receipt_files, kept.final) == (
        receipt.sha256,
        {NB: digest},
        False,
    )
    collect(layout, EXAM)
    assert verify_collected(layout, EXAM, "p2500001", receipt) == ""


def test_a_submission_after_the_end_is_refused_saying_why_and_nothing_is_taken(
    session, sitting, tmp_path
):
    layout, course, exam = sitting
    home = tmp_path / "home"
    write_answer(layout, "p2500001", home, "on time")
    current = sitting_of(session, course, exam, "p2500001")
    receipt = submit_exam(layout, EXAM, current, home, datetime.now(UTC), exam.timezone)
    record_receipt(session, course, exam, "p2500001", receipt, final=False)
    current = sitting_of(session, course, exam, "p2500001")
    write_answer(layout, "p2500001", home, "after the end")
    late = current.ends_at + timedelta(seconds=1)
    with pytest.raises(LateExamSubmissionError) as refused:
        submit_exam(layout, EXAM, current, home, late, exam.timezone)
    message = str(refused.value)
    assert message.startswith("final of mlmeca-2025 by p2500001: your exam ended at ")
    assert "submissions are closed" in message and receipt.sha256 in message
    assert len(inbound_of(layout, "p2500001")) == 1


def test_the_bell_submits_after_the_end_once_and_then_nothing_more(session, sitting, tmp_path):
    layout, course, exam = sitting
    home = tmp_path / "home"
    write_answer(layout, "p2500001", home, "saved at the end")
    current = sitting_of(session, course, exam, "p2500001")
    after = current.ends_at + timedelta(seconds=3)
    receipt = submit_exam(layout, EXAM, current, home, after, exam.timezone, bell=True)
    after_bell = record_receipt(session, course, exam, "p2500001", receipt, final=True)
    assert after_bell.final
    with pytest.raises(LateExamSubmissionError, match="submitted at the bell"):
        submit_exam(layout, EXAM, after_bell, home, after, exam.timezone, bell=True)
    not_started = sitting_of(session, course, exam, "p2500002")
    with pytest.raises(LateExamSubmissionError, match="you have not started this exam"):
        submit_exam(layout, EXAM, not_started, home, after, exam.timezone)


def test_extra_time_lets_a_student_submit_when_the_others_are_refused(session, sitting, tmp_path):
    layout, course, exam = sitting
    from coursehub.catalog.examoverrides import set_override

    set_override(session, course, exam, Allowance(percent=50), "mbuffat", username="p2500002")
    start_exam(session, course, exam, "p2500002", exam.opens_at + timedelta(minutes=30))
    plain, extra = (sitting_of(session, course, exam, s) for s in ("p2500001", "p2500002"))
    assert extra.ends_at > plain.ends_at
    home = tmp_path / "home2"
    write_answer(layout, "p2500002", home, "with extra time")
    between = plain.ends_at + timedelta(minutes=1)
    receipt = submit_exam(layout, EXAM, extra, home, between, exam.timezone)
    assert receipt.files
    with pytest.raises(LateExamSubmissionError):
        submit_exam(layout, EXAM, plain, tmp_path / "home", between, exam.timezone)


def test_a_submission_around_the_exam_is_never_collected_for_it(session, sitting, tmp_path):
    """nbgrader's own submit after the end reaches the inbound; the exam's collect skips it."""
    layout, course, exam = sitting
    home = tmp_path / "home"
    write_answer(layout, "p2500001", home, "on time")
    current = sitting_of(session, course, exam, "p2500001")
    receipt = submit_exam(layout, EXAM, current, home, datetime.now(UTC), exam.timezone)
    record_receipt(session, course, exam, "p2500001", receipt, final=False)
    write_answer(layout, "p2500001", home, "after the end, with nbgrader's own submit")
    submit_assignment(layout.exchange_root, COURSE, EXAM, "p2500001", home)
    start_exam(session, course, exam, "p2500002", datetime.now(UTC))
    write_answer(layout, "p2500002", tmp_path / "home2", "no receipt")
    submit_assignment(layout.exchange_root, COURSE, EXAM, "p2500002", tmp_path / "home2")
    assert len(inbound_of(layout, "p2500001")) == 2
    skipped = collect_exam(layout, EXAM, {"p2500001": receipt.submission})
    assert len(skipped) == 2 and all("has no exam receipt" in line for line in skipped)
    assert verify_collected(layout, EXAM, "p2500001", receipt) == ""
    assert not (layout.course_dir / "submitted" / "p2500002").exists()
    collect(layout, EXAM)  # an ordinary collect would take the newest: the late one
    assert "collected files differ" in verify_collected(layout, EXAM, "p2500001", receipt)


# --- coursehub exam ... ------------------------------------------------------------------------


@pytest.fixture
def catalog(database_url, tmp_path, monkeypatch):
    assert main(["db", "seed", "--database-url", database_url]) == 0
    released_exam(tmp_path)
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(tmp_path / "courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
    monkeypatch.setenv("COURSEHUB_GRADING_TIMEZONE", "Europe/Paris")
    return database_url


def run(capsys, url: str, *argv: str) -> tuple[int, str, str]:
    status = main(["exam", *argv, "--database-url", url])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_commands_create_override_start_submit_and_show(catalog, capsys, tmp_path):
    now = datetime.now(UTC)
    opens = (now - timedelta(minutes=10)).isoformat(timespec="seconds")
    hard_end = (now + timedelta(hours=3)).isoformat(timespec="seconds")
    status, out, err = run(
        capsys,
        catalog,
        *("create", COURSE, EXAM, "--opens", opens, "--duration", "90"),
        *("--hard-end", hard_end, "--start-code", "K7Q2", "--by", "mbuffat"),
        *("--allowed-imports", "numpy,pandas"),
    )
    assert (status, err) == (0, "")
    assert out.startswith("course mlmeca-2025: exam final: opens ") and "90 min" in out
    assert "(Europe/Paris), 90 min" in out and out.endswith(", start code\n")
    status, out, _ = run(capsys, catalog, "create", COURSE, EXAM, "--opens", opens,
                         "--duration", "90", "--hard-end", hard_end)  # fmt: skip
    assert status == 2
    status, out, _ = run(capsys, catalog, "list", COURSE, "--json")
    [listed] = json.loads(out)
    assert (listed["assignment"], listed["duration_min"], listed["start_code"]) == (EXAM, 90, True)
    assert listed["allowed_imports"] == "numpy,pandas"
    status, out, _ = run(
        capsys, catalog, "override", COURSE, EXAM, "--student", "p2500001", "--extra-percent", "33"
    )
    assert out == "exam final of mlmeca-2025: student p2500001: +33 %\n"
    status, out, _ = run(
        capsys, catalog, "override", COURSE, EXAM, "--student", "p2500001", "--extra-percent", "33"
    )
    assert out.endswith(": +33 %\n  replaces the earlier override: +33 %\n")
    status, _, err = run(capsys, catalog, "start", COURSE, EXAM, "--student", "p2500001")
    assert status == 2 and "no start code was given" in err
    status, out, _ = run(
        capsys, catalog, "start", COURSE, EXAM, "--student", "p2500001", "--code", "k7q2"
    )
    assert status == 0 and out.startswith("p2500001 started final at ")
    home = tmp_path / "home"
    layout = make_layout(COURSE, tmp_path / "courses", tmp_path / "exchange", single_user=True)
    status, out, err = run(capsys, catalog, "collect", COURSE, EXAM)
    assert status == 1 and "nothing collected: no student has a receipt for final" in err
    notebook = write_answer(layout, "p2500001", home, "from the command")
    status, out, err = run(
        capsys, catalog, "submit", COURSE, EXAM, "--student", "p2500001", "--work-dir", str(home)
    )
    assert (status, err) == (0, "")
    digest = hashlib.sha256(notebook.read_bytes()).hexdigest()
    assert f"  {digest}  {NB}\n" in out
    status, out, _ = run(capsys, catalog, "show", COURSE, EXAM, "--json")
    shown = {s["username"]: s for s in json.loads(out)["sittings"]}
    assert shown["p2500001"]["receipt"]["files"] == {NB: digest}
    assert shown["p2500001"]["extra_percent"] == 33
    assert 80 * 60 < shown["p2500001"]["seconds_left"] <= 119.7 * 60
    assert shown["p2500002"]["started_at"] is None
    status, out, _ = run(capsys, catalog, "show", COURSE, EXAM)
    assert "  p2500002: not started (no extra time)" in out
    status, out, _ = run(capsys, catalog, "collect", COURSE, EXAM)
    assert (status, out) == (0, "exam final of mlmeca-2025: 1 student(s) with a receipt\n")
    collected = tmp_path / "courses" / COURSE / "submitted" / "p2500001" / EXAM / NB
    assert hashlib.sha256(collected.read_bytes()).hexdigest() == digest


def test_the_commands_name_the_bad_option(catalog, capsys):
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, "--opens", "tomorrow",
                         "--duration", "90", "--hard-end", "2026-01-12T13:00")  # fmt: skip
    assert status == 2 and err.startswith("coursehub: error: --opens: 'tomorrow' is not a date")
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, "--opens", "2026-01-12T10:00",
                         "--duration", "0", "--hard-end", "2026-01-12T13:00")  # fmt: skip
    assert status == 2 and "--duration: must be 1 to 1440 minutes, got 0" in err
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, "--opens", "2026-01-12T10:00",
                         "--duration", "60", "--hard-end", "2026-01-12T09:00")  # fmt: skip
    assert status == 2 and "--hard-end: must be after opens_at" in err
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, "--opens", "2026-01-12T10:00",
                         "--duration", "60", "--hard-end", "2026-01-12T13:00",
                         "--by", "p2500001")  # fmt: skip
    assert status == 2 and "--by: 'p2500001' is not a lead of mlmeca-2025 (a student)" in err
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, "--opens", "2026-01-12T10:00",
                         "--duration", "60", "--hard-end", "2026-01-12T13:00",
                         "--by", "nobody")  # fmt: skip
    assert status == 2 and "--by: 'nobody' is not a lead of mlmeca-2025 (not in" in err
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, "--opens", "2026-01-12T10:00",
                         "--duration", "60", "--hard-end", "2026-01-12T13:00")  # fmt: skip
    assert status == 0 and err.startswith("warning: the hard end (2026-01-12 13:00")
    status, _, err = run(
        capsys, catalog, "override", COURSE, EXAM, "--group", "G1", "--extra-minutes", "-5"
    )
    assert status == 2 and err == "coursehub: error: --extra-minutes: must be 0 to 1440, got -5\n"
    status, _, err = run(
        capsys, catalog, "override", COURSE, EXAM, "--student", "p9999999", "--extra-minutes", "5"
    )
    assert status == 2 and "--student: 'p9999999' is not a student of mlmeca-2025" in err
    status, _, err = run(
        capsys, catalog, "override", COURSE, EXAM, "--student", "p2500001", "--opens",
        "2026-01-12T14:00",
    )  # fmt: skip
    assert status == 2 and "--opens: the slot opens at 2026-01-12 14:00" in err
    status, _, err = run(capsys, catalog, "show", COURSE, "midterm")
    assert status == 2 and "has no exam 'midterm'" in err


def test_the_bell_goes_on_past_a_missing_home_and_refuses_one_folder_for_all(
    catalog, capsys, tmp_path, monkeypatch
):
    from coursehub.grading import examcommands

    now = datetime.now(UTC)
    run(capsys, catalog, "create", COURSE, EXAM, "--duration", "90",
        "--opens", (now - timedelta(minutes=10)).isoformat(timespec="seconds"),
        "--hard-end", (now + timedelta(hours=3)).isoformat(timespec="seconds"))  # fmt: skip
    for student in ("p2500001", "p2500002"):
        assert run(capsys, catalog, "start", COURSE, EXAM, "--student", student)[0] == 0
    layout = make_layout(COURSE, tmp_path / "courses", tmp_path / "exchange", single_user=True)
    write_answer(layout, "p2500002", tmp_path / "homes" / "p2500002", "at the bell")

    class Later(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return datetime.now(tz) + timedelta(hours=4)

    monkeypatch.setattr(examcommands, "datetime", Later)
    status, _, err = run(capsys, catalog, "bell", COURSE, EXAM, "--work-dir", "/home/all")
    assert status == 2 and "--work-dir: '/home/all' has no {student}" in err
    pattern = str(tmp_path / "homes" / "{student}")
    status, out, _ = run(capsys, catalog, "bell", COURSE, EXAM, "--work-dir", pattern)
    assert status == 1, out
    assert f"p2500001: not submitted: {EXAM} of {COURSE} by p2500001: no work folder" in out
    assert "p2500002: submitted" in out and "1 submitted, 1 failed" in out


def test_a_time_ended_by_a_proctor_is_submitted_by_the_bell_and_saves_are_recorded(
    catalog, capsys, tmp_path
):
    now = datetime.now(UTC)
    run(capsys, catalog, "create", COURSE, EXAM, "--duration", "90",
        "--opens", (now - timedelta(minutes=10)).isoformat(timespec="seconds"),
        "--hard-end", (now + timedelta(hours=3)).isoformat(timespec="seconds"))  # fmt: skip
    for student in ("p2500001", "p2500002"):
        assert run(capsys, catalog, "start", COURSE, EXAM, "--student", student)[0] == 0
    layout = make_layout(COURSE, tmp_path / "courses", tmp_path / "exchange", single_user=True)
    homes = tmp_path / "exams"
    for student in ("p2500001", "p2500002"):
        write_answer(layout, student, homes / COURSE / EXAM / student, f"by {student}")
    status, out, _ = run(capsys, catalog, "end", COURSE, EXAM, "--student", "p2500002",
                         "--by", "mbuffat")  # fmt: skip
    assert status == 0 and "p2500002's time on final ended at " in out and "(by mbuffat)" in out
    status, _, err = run(capsys, catalog, "end", COURSE, EXAM, "--student", "p2500002")
    assert status == 2 and "--student: p2500002's time is over already" in err
    store = tmp_path / "store"
    status, out, _ = run(capsys, catalog, "snapshot", COURSE, EXAM, "--homes", str(homes),
                         "--store", str(store))  # fmt: skip
    assert status == 0 and "snapshot of final: 2 exam homes" in out
    status, out, _ = run(capsys, catalog, "show", COURSE, EXAM, "--json")
    shown = {s["username"]: s for s in json.loads(out)["sittings"]}
    sums = (store / COURSE / EXAM / "p2500001" / "SHA256SUMS").read_bytes()
    assert shown["p2500001"]["last_saved_sha256"] == hashlib.sha256(sums).hexdigest()
    assert shown["p2500002"]["ended_by"] == "mbuffat" and shown["p2500002"]["seconds_left"] == 0
    pattern = str(homes / COURSE / EXAM / "{student}")
    status, out, _ = run(capsys, catalog, "bell", COURSE, EXAM, "--work-dir", pattern)
    assert status == 0 and "p2500002: submitted" in out and "p2500001" not in out
    assert "1 submitted, 0 failed" in out


def test_the_scores_are_released_once_at_the_chosen_time(catalog, capsys, tmp_path):
    now = datetime.now(UTC)
    run(capsys, catalog, "create", COURSE, EXAM, "--duration", "60",
        "--opens", (now - timedelta(hours=3)).isoformat(timespec="seconds"),
        "--hard-end", (now - timedelta(hours=1)).isoformat(timespec="seconds"))  # fmt: skip
    status, _, err = run(capsys, catalog, "release", COURSE, EXAM, "--at", "lundi")
    assert status == 2 and "--at: 'lundi' is not a date and time" in err
    early = (now - timedelta(hours=2)).isoformat(timespec="seconds")
    status, out, err = run(capsys, catalog, "release", COURSE, EXAM, "--at", early)
    assert status == 0 and "released 20" in out
    assert "warning: the release (" in err and "is before the hard end" in err
    later = (now + timedelta(hours=1)).isoformat(timespec="seconds")
    status, out, err = run(capsys, catalog, "release", COURSE, EXAM, "--at", later)
    assert (status, err) == (0, ""), out
    status, out, _ = run(capsys, catalog, "release-due", COURSE)
    assert status == 0 and "0 exam(s) released, 0 failed, 0 waiting" in out  # not yet
    past = (now - timedelta(minutes=1)).isoformat(timespec="seconds")
    run(capsys, catalog, "release", COURSE, EXAM, "--at", past)
    status, out, _ = run(capsys, catalog, "release-due", COURSE)
    assert status == 0 and "final: nothing autograded yet; released once it is" in out
    status, out, _ = run(capsys, catalog, "list", COURSE, "--json")
    assert json.loads(out)[0]["release_at"].startswith(past[:10])


def test_an_exam_is_due_for_release_once_its_time_has_come_and_only_once(tmp_path):
    from types import SimpleNamespace

    from coursehub.grading.examrelease import due_exams, record_path

    now = datetime.now(UTC)
    exams = [
        SimpleNamespace(assignment="a", release_at=now - timedelta(minutes=1)),
        SimpleNamespace(assignment="b", release_at=now + timedelta(minutes=1)),
        SimpleNamespace(assignment="c", release_at=None),
        SimpleNamespace(assignment="d", release_at=now - timedelta(days=1)),
    ]
    record_path(tmp_path, "d").write_text("{}")
    assert [e.assignment for e in due_exams(exams, tmp_path, now)] == ["a"]


def test_the_update_command_changes_what_it_is_given_and_names_a_bad_option(catalog, capsys):
    run(capsys, catalog, "create", COURSE, EXAM, "--opens", "2026-01-12T10:00",
        "--duration", "60", "--hard-end", "2026-01-12T13:00", "--start-code", "K7Q2")  # fmt: skip
    status, out, _ = run(capsys, catalog, "update", COURSE, EXAM, "--allowed-imports", "numpy",
                         "--start-code", "")  # fmt: skip
    assert status == 0 and out.endswith(": allowed_imports: numpy; start code removed\n"), out
    status, out, _ = run(capsys, catalog, "list", COURSE, "--json")
    [listed] = json.loads(out)
    assert (listed["allowed_imports"], listed["start_code"]) == ("numpy", False)
    status, _, err = run(capsys, catalog, "update", COURSE, EXAM, "--allowed-networks", "nope")
    assert status == 2 and err.startswith("coursehub: error: --allowed-networks: ")
    status, out, _ = run(capsys, catalog, "update", COURSE, EXAM, "--warn-before", "10",
                         "--fullscreen", "required")  # fmt: skip
    assert status == 0 and out.endswith(": warn_before_min: 10 min; fullscreen: required\n"), out
    for option, value, words in (
        ("--warn-before", "-1", "--warn-before: must be 0 to 60 minutes"),
        ("--warn-before", "61", "(the exam's duration; 0: no warning), got 61"),
        ("--warn-before", "soon", "--warn-before: must be a whole number of minutes, got 'soon'"),
        ("--fullscreen", "yes", "--fullscreen: must be offered or required, got 'yes'"),
    ):
        status, _, err = run(capsys, catalog, "update", COURSE, EXAM, option, value,
                             "--allowed-imports", "scipy")  # fmt: skip
        assert status == 2 and words in err, err
    status, out, _ = run(capsys, catalog, "list", COURSE, "--json")
    [listed] = json.loads(out)
    assert (listed["warn_before_min"], listed["fullscreen"]) == (10, "required")
    assert listed["allowed_imports"] == "numpy"  # the refused updates changed nothing


def test_the_create_command_takes_the_clocks_settings_and_names_a_bad_one(catalog, capsys):
    window = ("--opens", "2026-01-12T10:00", "--duration", "30", "--hard-end", "2026-01-12T13:00")
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, *window, "--warn-before", "45")
    assert status == 2 and "--warn-before: must be 0 to 30 minutes" in err, err
    status, _, err = run(capsys, catalog, "create", COURSE, EXAM, *window, "--fullscreen", "on")
    assert status == 2 and "--fullscreen: must be offered or required, got 'on'" in err, err
    status, out, _ = run(capsys, catalog, "list", COURSE, "--json")
    assert json.loads(out) == []
    status, out, _ = run(capsys, catalog, "create", COURSE, EXAM, *window,
                         "--warn-before", "0", "--fullscreen", "required")  # fmt: skip
    assert status == 0 and out.endswith(", no warning, full screen required\n"), out
    status, _, err = run(capsys, catalog, "update", COURSE, EXAM)
    assert status == 2 and "nothing to change" in err
    status, _, err = run(capsys, catalog, "update", COURSE, "midterm", "--start-code", "")
    assert status == 2 and "has no exam 'midterm'" in err
