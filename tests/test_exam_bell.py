"""120 students' exam work submitted by the bell within 5 s while the grader collects: all arrive.

nbgrader#919 at an exam's end, through the exam's path: each student's work
is submitted from its own process (the servers of a hub) at a random moment
within 5 s after their common end (:func:`coursehub.grading.examsubmit.submit_exam`,
the bell's), each receipt kept in the catalog, while the exam's collect
(:func:`coursehub.grading.examcollect.collect_exam`) runs in a loop. Every
collected folder must hold exactly what its receipt says: none lost, none
partial. ``benchmarks/bench_exam.py`` prints the times.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
import random
import time
from datetime import UTC, datetime, timedelta

import nbformat
import pytest

from coursehub.catalog.exams import create_exam, list_sittings, record_receipt, start_exam
from coursehub.catalog.examtime import Window
from coursehub.catalog.seed import seed_demo
from coursehub.grading.assignments import add_assignment, generate_assignment, release_assignment
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.examcollect import collect_exam
from coursehub.grading.examsubmit import submit_exam, verify_collected
from coursehub.grading.exchange import STAGING_PREFIX, fetch_assignment
from coursehub.grading.layout import ensure_course, make_layout
from coursehub.web.testing import add_students

EXAM = "final"
NB = f"{DEMO_ASSIGNMENT}.ipynb"
COURSE = "mlmeca-2025"


def released_exam(root):
    layout = make_layout(COURSE, root / "courses", root / "exchange", single_user=True)
    ensure_course(layout)
    add_assignment(layout, EXAM, [demo_source_dir() / NB])
    generate_assignment(layout, EXAM)
    release_assignment(layout, EXAM)
    return layout


def _bell(layout, sitting, home, at, queue) -> None:
    time.sleep(max(0.0, at - time.time()))
    try:
        receipt = submit_exam(layout, EXAM, sitting, home, datetime.now(UTC), "UTC", bell=True)
        queue.put((sitting.username, receipt))
    except Exception as exc:
        queue.put((sitting.username, str(exc)))
    queue.close()
    queue.join_thread()
    os._exit(0)


def _drain(queue) -> list:
    found = []
    while True:
        try:
            found.append(queue.get(timeout=0.05))
        except queues.Empty:
            return found


@pytest.mark.slow
def test_120_students_at_the_bell_within_5_s_are_all_collected_as_their_receipts_say(
    session, tmp_path
):
    layout = released_exam(tmp_path)
    course = seed_demo(session)
    add_students(session, course, 120, groups=4)
    end = datetime.now(UTC) - timedelta(seconds=1)
    window = Window(end - timedelta(hours=1), 30, end + timedelta(hours=1), "UTC")
    exam = create_exam(session, course, EXAM, window, "mbuffat")
    for n in range(120):
        start_exam(session, course, exam, f"s{n:07d}", end - timedelta(minutes=30))
    sittings = [s for s in list_sittings(session, course, exam) if s.username.startswith("s")]
    assert len(sittings) == 120 and all(s.ends_at == end for s in sittings)
    for n, sitting in enumerate(sittings):
        home = tmp_path / "homes" / sitting.username
        folder = fetch_assignment(layout.exchange_root, COURSE, EXAM, sitting.username, home)
        notebook = nbformat.read(folder / NB, as_version=4)
        padding = "x" * 2_000_000 if n % 10 == 0 else ""  # a few slow copies
        notebook.cells[0].source += f"\n# answer of {sitting.username}\n# {padding}"
        nbformat.write(notebook, folder / NB)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start = time.time() + 1.0
    procs = [
        context.Process(
            target=_bell,
            args=(layout, s, tmp_path / "homes" / s.username, start + random.uniform(0, 5), queue),
        )
        for s in sittings
    ]
    for proc in procs:
        proc.start()
    results: list = []
    collects = 0
    while any(proc.is_alive() for proc in procs):
        collect_exam(layout, EXAM, {u: r.submission for u, r in results})
        collects += 1
        results.extend(_drain(queue))
    for proc in procs:
        proc.join()
    results.extend(_drain(queue))
    failed = {u: r for u, r in results if isinstance(r, str)}
    assert failed == {} and len(results) == 120
    receipts = dict(results)
    collect_exam(layout, EXAM, {u: r.submission for u, r in receipts.items()})
    for username, receipt in receipts.items():
        record_receipt(session, course, exam, username, receipt, final=True)
    assert collects >= 1
    problems = [verify_collected(layout, EXAM, u, r) for u, r in receipts.items()]
    assert [p for p in problems if p] == []  # none missing, none partial
    kept = [s for s in list_sittings(session, course, exam) if s.final and s.receipt_sha256]
    assert len(kept) == 120
    inbound = layout.exchange_root / COURSE / "inbound"
    assert not list(inbound.glob(f"{STAGING_PREFIX}*"))
