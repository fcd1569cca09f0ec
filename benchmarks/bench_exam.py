"""The bell of an exam: 120 students' work submitted within 5 s, receipts, time to all collected.

For each repeat, a fresh catalog (SQLite, migrated) holds the demo course
with ``--students`` students and an exam ``final``
(:mod:`coursehub.catalog.exams`); a fresh course releases the demo
assignment as ``final``; every student starts (the start recorded in the
catalog), fetches and writes an answer (every tenth with ``--padding-mb`` of
output, so that some copies take a while). Their end comes at the same
moment; then each student's work is submitted by the bell from its own
process (forked: the servers of a hub, without paying nbgrader's import per
student) at a random moment within ``--window`` seconds after the end
(:func:`coursehub.grading.examsubmit.submit_exam`, ``bell=True``: the atomic
submit of :class:`coursehub.grading.exchange.PrivateSubmit`), while the
grader collects in a loop; a last collect follows the last
submission. The collect is the exam's
(:func:`coursehub.grading.examcollect.collect_exam`: each student's
receipted submission, from the receipts received so far). Each receipt is
kept in the catalog.

Printed per repeat: receipts kept in the catalog, students collected whole
(the collected files have the SHA-256 of their receipt,
:func:`coursehub.grading.examsubmit.verify_collected`), partial (collected,
other bytes), missing (not collected), failed submissions, the collects
that ran, the time from the bell until the last collect ended (all
collected), the slowest single submission, and whether a submission after
the bell was refused; then the medians with a 95 % bootstrap interval
(:func:`coursehub.bench.stats.describe_median`).

Run: ``.venv/bin/python benchmarks/bench_exam.py [--students 120 --window 5 --repeats 3]``
(about a minute a repeat on 2 CPUs). Target: in every repeat every receipt
kept and every submission collected whole (none lost, none partial), and the
late one refused.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat

from coursehub.bench.stats import describe_median
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.exams import (
    create_exam,
    list_sittings,
    record_receipt,
    sitting_of,
    start_exam,
)
from coursehub.catalog.examtime import Window
from coursehub.catalog.schema import upgrade_database
from coursehub.catalog.seed import seed_demo
from coursehub.grading.assignments import add_assignment, generate_assignment, release_assignment
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.examcollect import collect_exam
from coursehub.grading.examsubmit import LateExamSubmissionError, submit_exam, verify_collected
from coursehub.grading.exchange import fetch_assignment
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout
from coursehub.web.testing import add_students

EXAM = "final"
NB = f"{DEMO_ASSIGNMENT}.ipynb"
ZONE = "Europe/Paris"


@dataclass(frozen=True)
class Round:
    """One repeat: counts of receipts and submissions, times (s), the late check."""

    receipts: int
    whole: int
    partial: int
    missing: int
    failed: int
    collects: int
    elapsed_s: float
    slowest_submit_s: float
    late_refused: bool


def prepare(root: Path, n_students: int, padding_mb: float, bell: datetime) -> tuple:
    """Catalog, course, exam and students (started so that they all end at ``bell``)."""
    layout = make_layout("mlmeca-2025", root / "courses", root / "exchange", single_user=True)
    ensure_course(layout)
    add_assignment(layout, EXAM, [demo_source_dir() / NB])
    generate_assignment(layout, EXAM)
    release_assignment(layout, EXAM)
    engine = make_engine(f"sqlite:///{root / 'catalog.sqlite'}")
    upgrade_database(engine)
    window = Window(bell - timedelta(hours=1), 30, bell + timedelta(hours=1), ZONE)
    with session_scope(engine) as session:
        course = seed_demo(session)
        add_students(session, course, n_students, groups=4)
        exam = create_exam(session, course, EXAM, window, "mbuffat")
        students = [s.username for s in list_sittings(session, course, exam)]
        students = [s for s in students if s.startswith("s")]
        for student in students:
            start_exam(session, course, exam, student, bell - timedelta(minutes=30))
    for n, student in enumerate(students):
        home = root / "homes" / student
        folder = fetch_assignment(layout.exchange_root, layout.course_id, EXAM, student, home)
        notebook = nbformat.read(folder / NB, as_version=4)
        padding = "x" * int(padding_mb * 2**20) if n % 10 == 0 else ""
        notebook.cells[0].source += f"\n# answer of {student}\n# {padding}"
        nbformat.write(notebook, folder / NB)
    return engine, layout, students


def bell_submit(layout: CourseLayout, sitting, home: Path, at: float, queue) -> None:
    """Child process: wait until ``at`` (epoch s), submit as the bell, send the receipt."""
    time.sleep(max(0.0, at - time.time()))
    began = time.perf_counter()
    try:
        now = datetime.now(UTC)
        receipt = submit_exam(layout, EXAM, sitting, home, now, ZONE, bell=True)
        queue.put((sitting.username, receipt, time.perf_counter() - began))
    except Exception as exc:  # counted by the parent
        queue.put((sitting.username, None, str(exc)))
    queue.close()
    queue.join_thread()  # the message is in the pipe before the process ends
    os._exit(0)


def one_round(n_students: int, window_s: float, padding_mb: float) -> Round:
    """Run one repeat in a fresh temporary catalog and course; return its counts."""
    with tempfile.TemporaryDirectory(prefix="bench-exam-") as tmp:
        root = Path(tmp)
        bell = datetime.now(UTC) + timedelta(seconds=20)  # passed by the time all are ready
        engine, layout, students = prepare(root, n_students, padding_mb, bell)
        with session_scope(engine) as session:
            from coursehub.catalog.courses import get_course
            from coursehub.catalog.exams import get_exam

            course = get_course(session, "mlmeca-2025")
            exam = get_exam(session, course, EXAM)
            sittings = {s: sitting_of(session, course, exam, s) for s in students}
        assert all(s.ends_at is not None and s.ends_at <= bell for s in sittings.values())
        collect_exam(layout, EXAM, {})  # the grader's loop ran before the bell: imports done
        time.sleep(max(0.0, (bell - datetime.now(UTC)).total_seconds()))
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        start = time.time() + 1.0
        procs = [
            context.Process(
                target=bell_submit,
                args=(
                    layout,
                    sittings[s],
                    root / "homes" / s,
                    start + random.uniform(0, window_s),
                    queue,
                ),
            )
            for s in students
        ]
        for proc in procs:
            proc.start()
        results, collects = [], 0
        while any(proc.is_alive() for proc in procs):
            collect_exam(layout, EXAM, receipted(results))  # while the bell submits
            collects += 1
            results.extend(drain(queue))
        for proc in procs:
            proc.join()
        results.extend(drain(queue))
        collect_exam(layout, EXAM, receipted(results))
        elapsed = time.time() - start
        lost = len(procs) - len(results)  # a process that died without a word
        results.extend((f"process {n}", None, "ended without a receipt") for n in range(lost))
        return tally(engine, layout, results, collects + 1, elapsed, root)


def receipted(results: list) -> dict[str, str]:
    """``{student: inbound folder}`` of the receipts received so far."""
    return {student: receipt.submission for student, receipt, _ in results if receipt}


def drain(queue) -> list:
    """Every message waiting in ``queue``."""
    import queue as queues

    found = []
    while True:
        try:
            found.append(queue.get(timeout=0.05))
        except queues.Empty:
            return found


def tally(
    engine, layout: CourseLayout, results: list, collects: int, elapsed: float, root: Path
) -> Round:
    """Keep the receipts in the catalog, check each against what was collected, try a late one."""
    from coursehub.catalog.courses import get_course
    from coursehub.catalog.exams import get_exam

    whole = partial = missing = failed = 0
    slowest = 0.0
    with session_scope(engine) as session:
        course = get_course(session, "mlmeca-2025")
        exam = get_exam(session, course, EXAM)
        for student, receipt, detail in results:
            if receipt is None:
                failed += 1
                print(f"  {student}: {detail}")
                continue
            slowest = max(slowest, detail)
            record_receipt(session, course, exam, student, receipt, final=True)
            problem = verify_collected(layout, EXAM, student, receipt)
            if not problem:
                whole += 1
            elif "not collected" in problem:
                missing += 1
            else:
                partial += 1
    with session_scope(engine) as session:
        course = get_course(session, "mlmeca-2025")
        exam = get_exam(session, course, EXAM)
        kept = [s for s in list_sittings(session, course, exam) if s.final and s.receipt_sha256]
        first = kept[0]
        try:
            submit_exam(
                layout, EXAM, first, root / "homes" / first.username, datetime.now(UTC), ZONE
            )
            late_refused = False
        except LateExamSubmissionError:
            late_refused = True
    engine.dispose()
    return Round(
        len(kept), whole, partial, missing, failed, collects, elapsed, slowest, late_refused
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=120)
    parser.add_argument("--window", type=float, default=5.0, help="seconds the submits spread over")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--padding-mb", type=float, default=10.0)
    args = parser.parse_args(argv)
    print(
        f"exam bell: {args.students} students submitted within {args.window:g} s, collect in a loop"
    )
    rounds: list[Round] = []
    for repeat in range(args.repeats):
        r = one_round(args.students, args.window, args.padding_mb)
        rounds.append(r)
        print(
            f"repeat {repeat + 1}: receipts kept {r.receipts}, collected whole {r.whole}, "
            f"partial {r.partial}, missing {r.missing}, failed submissions {r.failed}, "
            f"{r.collects} collects, all collected {r.elapsed_s:.1f} s after the bell, "
            f"slowest submission {r.slowest_submit_s:.2f} s, "
            f"late submission refused: {'yes' if r.late_refused else 'NO'}",
            flush=True,
        )
    print(
        describe_median(
            "time from the bell until all collected", [r.elapsed_s for r in rounds], " s"
        )
    )
    print(describe_median("slowest submission", [r.slowest_submit_s for r in rounds], " s"))
    print(
        describe_median(
            "lost (partial + missing + failed)", [r.partial + r.missing + r.failed for r in rounds]
        )
    )
    ok = all(r.receipts == r.whole == args.students and r.late_refused for r in rounds)
    target = "every receipt kept, every submission collected whole, the late one refused"
    print(f"target ({target}):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
