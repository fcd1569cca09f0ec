"""After the due date, submit and collect follow the assignment's after-due rule (real nbgrader).

A student submits on time (their submission, in the inbound and in their
nbgrader cache, is recorded as made two hours ago, the due date one hour
ago), then again now: late.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from coursehub.errors import CoursehubError
from coursehub.grading.assignments import collect, generate_assignment, release_assignment
from coursehub.grading.create import NewAssignment, create_assignment, set_schedule
from coursehub.grading.deadline import published_path
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import submit_assignment
from coursehub.grading.latepolicy import LatePolicy
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout
from test_grading_e2e import CORRECT, answer_assignment

STAMP = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's Exchange.timestamp_format


def backdate(folder: Path, student: str, ps: str, when: datetime) -> None:
    """Record ``student``'s only submission of ``ps`` in ``folder`` as made at ``when``.

    Its name (what collect reads) and its ``timestamp.txt`` (what autograde reads).
    """
    [entry] = folder.glob(f"{student}+{ps}+*")
    parts = entry.name.split("+")
    parts[2] = when.strftime(STAMP)
    (entry / "timestamp.txt").write_text(parts[2])
    entry.rename(entry.with_name("+".join(parts)))


def on_time_then_due(tmp_path: Path, rule: str) -> tuple[CourseLayout, Path]:
    """Course, ``ps1`` released, ana's on-time submission; the due date one hour ago."""
    layout = make_layout("dl-2025", tmp_path / "courses", tmp_path / "exchange", single_user=True)
    ensure_course(layout)
    now = datetime.now(UTC)
    policy = LatePolicy("zero", after_due=rule)
    source = demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"
    new = NewAssignment("ps1", now + timedelta(days=1), policy, "Europe/Paris")
    create_assignment(layout, new, source.name, source.read_bytes())
    generate_assignment(layout, "ps1")
    release_assignment(layout, "ps1")
    answer_assignment(layout, tmp_path, "ps1", "ana", CORRECT)
    home = tmp_path / "home" / "ana"
    for folder in (
        layout.exchange_root / "dl-2025" / "inbound",
        home / ".nbgrader_cache" / "dl-2025",
    ):
        backdate(folder, "ana", "ps1", now - timedelta(hours=2))
    set_schedule(layout, "ps1", now - timedelta(hours=1), policy, "Europe/Paris")
    return layout, home


def submit_late(layout: CourseLayout, home: Path) -> str:
    return submit_assignment(layout.exchange_root, "dl-2025", "ps1", "ana", home)


def collected_time(layout: CourseLayout) -> datetime:
    stamp = (layout.course_dir / "submitted" / "ana" / "ps1" / "timestamp.txt").read_text()
    return datetime.strptime(stamp.replace(" UTC", ""), STAMP.replace(" %Z", "")).replace(
        tzinfo=UTC
    )


def inbound_count(layout: CourseLayout) -> int:
    return len(list((layout.exchange_root / "dl-2025" / "inbound").glob("ana+ps1+*")))


@pytest.mark.slow
def test_a_hard_deadline_refuses_at_submit_and_collect_skips_what_came_in_anyway(tmp_path):
    layout, home = on_time_then_due(tmp_path, "refuse")
    published = json.loads(published_path(layout.exchange_root, "dl-2025").read_text())
    assert published["ps1"]["after_due"] == "refuse"
    assert published["ps1"]["timezone"] == "Europe/Paris"
    with pytest.raises(CoursehubError, match="hard deadline: submissions are closed"):
        submit_late(layout, home)
    assert inbound_count(layout) == 1
    # nbgrader's own submit knows no deadline: a late folder in the inbound is skipped
    [on_time] = (layout.exchange_root / "dl-2025" / "inbound").glob("ana+ps1+*")
    parts = on_time.name.split("+")
    parts[2] = datetime.now(UTC).strftime(STAMP)
    (on_time.parent / "+".join(parts)).mkdir()
    log = collect(layout, "ps1")
    assert "after the hard deadline" in log
    assert collected_time(layout) < datetime.now(UTC) - timedelta(hours=1)


@pytest.mark.slow
def test_keep_on_time_takes_a_late_submission_but_collects_the_on_time_one(tmp_path):
    layout, home = on_time_then_due(tmp_path, "keep_on_time")
    note = submit_late(layout, home)
    assert "stays the one graded" in note and "Europe/Paris" in note
    assert inbound_count(layout) == 2
    collect(layout, "ps1")
    assert collected_time(layout) < datetime.now(UTC) - timedelta(hours=1)


@pytest.mark.slow
def test_accept_asks_before_a_late_submission_replaces_the_on_time_one(tmp_path):
    layout, home = on_time_then_due(tmp_path, "accept")
    with pytest.raises(CoursehubError, match="would replace your on-time submission"):
        submit_late(layout, home)
    assert inbound_count(layout) == 1
    assert "replaces your on-time submission" in submit_late(layout, home)  # confirmed
    assert inbound_count(layout) == 2
    collect(layout, "ps1")
    assert collected_time(layout) > datetime.now(UTC) - timedelta(hours=1)  # the late one
    collect(layout, "ps1", before_duedate=True)
    assert collected_time(layout) < datetime.now(UTC) - timedelta(hours=1)
