"""A submission reaches the inbound whole or not at all, with many students submitting at once.

nbgrader#919: at the end of a final, 112 students submitted within seconds and
some submissions were lost. nbgrader's submit copies straight into the
inbound; a collect running meanwhile takes a half-copied folder and never
looks at it again. These tests run nbgrader's real submit and collect on a
real exchange (one Unix user, the demo's mode).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
import time
from pathlib import Path

import nbformat
import pytest

from coursehub.errors import CoursehubError
from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    release_assignment,
)
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import (
    STAGING_PREFIX,
    PrivateSubmit,
    fetch_assignment,
    submit_assignment,
)
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout

PS = "ps1"
NB = f"{DEMO_ASSIGNMENT}.ipynb"


def released_course(root: Path) -> CourseLayout:
    layout = make_layout("phys-2025", root / "courses", root / "exchange", single_user=True)
    ensure_course(layout)
    add_assignment(layout, PS, [demo_source_dir() / NB])
    generate_assignment(layout, PS)
    release_assignment(layout, PS)
    return layout


def inbound(layout: CourseLayout) -> Path:
    return layout.exchange_root / layout.course_id / "inbound"


def fetch_and_answer(layout: CourseLayout, student: str, home: Path, padding: int = 0) -> str:
    """Fetch as ``student``, write a marker (and ``padding`` bytes) in the notebook; its SHA-256."""
    folder = fetch_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    notebook = nbformat.read(folder / NB, as_version=4)
    notebook.cells[0].source += f"\n# answer of {student}\n# {'x' * padding}"
    nbformat.write(notebook, folder / NB)
    return hashlib.sha256((folder / NB).read_bytes()).hexdigest()


def test_nothing_of_a_submission_is_in_the_inbound_until_all_of_it_is(tmp_path, monkeypatch):
    layout = released_course(tmp_path)
    home = tmp_path / "home"
    fetch_and_answer(layout, "alice", home)
    seen_during_copy: list[list[str]] = []
    plain_copy = PrivateSubmit.do_copy

    def watched_copy(self, src, dest, log=None):
        plain_copy(self, src, dest, log)
        if inbound(layout) in Path(dest).parents:  # the inbound copy, not the cache's
            seen_during_copy.append(sorted(p.name for p in inbound(layout).glob("alice+*")))

    monkeypatch.setattr(PrivateSubmit, "do_copy", watched_copy)
    submit_assignment(layout.exchange_root, layout.course_id, PS, "alice", home)

    assert seen_during_copy == [[]]  # copied, not yet visible to a collect
    [submission] = inbound(layout).glob("alice+*")
    assert sorted(p.name for p in submission.iterdir()) == [
        NB,
        "submission_secret.txt",
        "timestamp.txt",
    ]
    assert not list(inbound(layout).glob(f"{STAGING_PREFIX}*"))


def test_a_submit_that_fails_midway_leaves_nothing_in_the_inbound(tmp_path, monkeypatch):
    layout = released_course(tmp_path)
    home = tmp_path / "home"
    fetch_and_answer(layout, "alice", home)
    plain_copy = PrivateSubmit.do_copy

    def copy_then_fail(self, src, dest, log=None):
        plain_copy(self, src, dest, log)
        if inbound(layout) in Path(dest).parents:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(PrivateSubmit, "do_copy", copy_then_fail)
    with pytest.raises(OSError, match="No space left"):
        submit_assignment(layout.exchange_root, layout.course_id, PS, "alice", home)
    assert list(inbound(layout).iterdir()) == []


def _submit_at(layout: CourseLayout, student: str, home: Path, at: float) -> None:
    time.sleep(max(0.0, at - time.time()))
    try:
        submit_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    except CoursehubError as exc:
        print(exc)
        os._exit(3)
    os._exit(0)


@pytest.mark.slow
def test_120_students_submitting_within_5_s_while_collect_runs_are_all_collected_whole(tmp_path):
    layout = released_course(tmp_path)
    students = [f"p25{n:05d}" for n in range(120)]
    expected = {}
    for n, student in enumerate(students):
        # a few large notebooks make the copies slow enough to overlap a collect
        padding = 2_000_000 if n % 10 == 0 else 0
        expected[student] = fetch_and_answer(layout, student, tmp_path / student, padding)
    start = time.time() + 1.0
    context = multiprocessing.get_context("fork")
    procs = [
        context.Process(
            target=_submit_at,
            args=(layout, s, tmp_path / s, start + random.uniform(0.0, 5.0)),
        )
        for s in students
    ]
    for proc in procs:
        proc.start()
    collects = 0
    while any(proc.is_alive() for proc in procs):
        collect(layout, PS)  # the grader collecting while students still submit
        collects += 1
    collect(layout, PS)
    for proc in procs:
        proc.join()
    failed = {s: proc.exitcode for s, proc in zip(students, procs, strict=True) if proc.exitcode}
    assert failed == {}
    assert collects >= 1  # at least one collect ran while students were submitting

    submitted = layout.course_dir / "submitted"
    got = {
        s: hashlib.sha256((submitted / s / PS / NB).read_bytes()).hexdigest()
        for s in students
        if (submitted / s / PS / NB).is_file()
    }
    assert sorted(set(expected) - set(got)) == []  # none missing
    assert {s for s in got if got[s] != expected[s]} == set()  # none partial
    assert all((submitted / s / PS / "timestamp.txt").is_file() for s in students)
    assert not list(inbound(layout).glob(f"{STAGING_PREFIX}*"))
