"""120 students submitting within 5 s while the grader collects: time to collect all, none lost.

The report (jupyter/nbgrader#919): 112 students submitted at the end of a
final and some submissions were lost. For each repeat a fresh course
releases the demo assignment, ``--students`` students fetch it and write an
answer (every tenth with ``--padding-mb`` of output, so that some copies
take a while), then each submits from its own process (forked: the servers
of a hub, without paying nbgrader's import per student) at a random moment
within ``--window`` seconds, while the grader runs coursehub's collect in a
loop; a last collect follows the last submit. Two variants, interleaved:

- ``nbgrader``: nbgrader's own submit, which copies straight into the inbound;
- ``coursehub``: :class:`coursehub.grading.exchange.PrivateSubmit`, which
  copies into a hidden staging folder and renames the whole submission into
  the inbound.

Printed per repeat: how many times a collect in the loop took a folder
that was still being copied (nbgrader replaces such a folder at the next
collect, as it lacks ``timestamp.txt``; it is lost when that collect was the
grader's last before autograding), collected whole (the notebook in ``submitted/`` has the
SHA-256 the student wrote), partial (collected without its notebook or with
other bytes: what a grader would grade as 0), missing, the number of
collects that ran, and the time from the first submit until the last
collect ended; then the medians with a 95 % bootstrap interval
(:func:`coursehub.bench.stats.describe_median`).

Run: ``.venv/bin/python benchmarks/bench_submit.py [--students 120 --window 5 --repeats 3]``
(about a minute a repeat on 2 CPUs). Target: every submission collected
whole and no collect ever
taking an incomplete folder, in every repeat.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.exchange.default.submit import ExchangeSubmit

from coursehub.bench.stats import describe_median
from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    release_assignment,
)
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import (
    PrivateSubmit,
    fetch_assignment,
    make_submission_private,
    submit_assignment,
)
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout

PS = "ps1"
NB = f"{DEMO_ASSIGNMENT}.ipynb"
VARIANTS = ("nbgrader", "coursehub")


@dataclass(frozen=True)
class Round:
    """One repeat of one variant: counts of submissions and the time to collect them all (s)."""

    variant: str
    whole: int
    partial: int
    missing: int
    failed_submits: int
    collects: int
    incomplete_seen: int
    elapsed_s: float


def nbgrader_copy_files(self: PrivateSubmit) -> None:
    """nbgrader's submit as it is: the copy goes straight into the inbound."""
    ExchangeSubmit.copy_files(self)
    make_submission_private(Path(self.inbound_path) / self.assignment_filename)


def prepare(root: Path, students: list[str], padding_mb: float) -> tuple[CourseLayout, dict]:
    """Release the assignment and have each student fetch and answer it; return the hashes."""
    layout = make_layout("bench-2025", root / "courses", root / "exchange", single_user=True)
    ensure_course(layout)
    add_assignment(layout, PS, [demo_source_dir() / NB])
    generate_assignment(layout, PS)
    release_assignment(layout, PS)
    expected = {}
    for n, student in enumerate(students):
        home = root / "homes" / student
        folder = fetch_assignment(layout.exchange_root, layout.course_id, PS, student, home)
        notebook = nbformat.read(folder / NB, as_version=4)
        padding = "x" * int(padding_mb * 2**20) if n % 10 == 0 else ""
        notebook.cells[0].source += f"\n# answer of {student}\n# {padding}"
        nbformat.write(notebook, folder / NB)
        expected[student] = hashlib.sha256((folder / NB).read_bytes()).hexdigest()
    return layout, expected


def submit_at(layout: CourseLayout, student: str, home: Path, at: float, variant: str) -> None:
    """Child process: wait until ``at`` (epoch s), submit, exit 0 (3 if the submit failed)."""
    if variant == "nbgrader":
        PrivateSubmit.copy_files = nbgrader_copy_files  # type: ignore[method-assign]
        PrivateSubmit.do_copy = ExchangeSubmit.do_copy  # type: ignore[method-assign]
    time.sleep(max(0.0, at - time.time()))
    try:
        submit_assignment(layout.exchange_root, layout.course_id, PS, student, home)
    except Exception:  # counted by the parent
        os._exit(3)
    os._exit(0)


def one_round(variant: str, students: list[str], window_s: float, padding_mb: float) -> Round:
    """Run one repeat of ``variant`` in a fresh temporary course; return its counts."""
    with tempfile.TemporaryDirectory(prefix="bench-submit-") as tmp:
        root = Path(tmp)
        layout, expected = prepare(root, students, padding_mb)
        context = multiprocessing.get_context("fork")
        start = time.time() + 1.0
        procs = [
            context.Process(
                target=submit_at,
                args=(layout, s, root / "homes" / s, start + random.uniform(0, window_s), variant),
            )
            for s in students
        ]
        for proc in procs:
            proc.start()
        collects = incomplete_seen = 0
        while any(proc.is_alive() for proc in procs):
            collect(layout, PS)
            collects += 1
            incomplete_seen += len(incomplete(layout.course_dir / "submitted", expected))
        collect(layout, PS)
        elapsed = time.time() - start
        for proc in procs:
            proc.join()
        submitted = layout.course_dir / "submitted"
        whole = partial = missing = 0
        for student, digest in expected.items():
            notebook = submitted / student / PS / NB
            if not (submitted / student / PS).is_dir():
                missing += 1
            elif notebook.is_file() and hashlib.sha256(notebook.read_bytes()).hexdigest() == digest:
                whole += 1
            else:
                partial += 1
        failed = sum(proc.exitcode != 0 for proc in procs)
        return Round(
            variant, whole, partial, missing, failed, collects + 1, incomplete_seen, elapsed
        )


def incomplete(submitted: Path, expected: dict[str, str]) -> list[str]:
    """Students whose collected folder lacks the secret nbgrader writes last, or their notebook."""
    found = []
    for student, digest in expected.items():
        folder = submitted / student / PS
        if not folder.is_dir():
            continue
        notebook = folder / NB
        whole = (folder / "submission_secret.txt").is_file() and notebook.is_file()
        if not whole or hashlib.sha256(notebook.read_bytes()).hexdigest() != digest:
            found.append(student)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=120)
    parser.add_argument("--window", type=float, default=5.0, help="seconds the submits spread over")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--padding-mb", type=float, default=30.0)
    args = parser.parse_args(argv)
    students = [f"s{n:05d}" for n in range(args.students)]
    rounds: list[Round] = []
    print(f"{args.students} students submitting within {args.window:g} s, collect in a loop")
    for repeat in range(args.repeats):
        for variant in VARIANTS:
            r = one_round(variant, students, args.window, args.padding_mb)
            rounds.append(r)
            print(
                f"repeat {repeat + 1} {variant:9s}: whole {r.whole}, partial {r.partial}, "
                f"missing {r.missing}, failed submits {r.failed_submits}, "
                f"{r.collects} collects, {r.incomplete_seen} incomplete folders taken, "
                f"all collected after {r.elapsed_s:.1f} s",
                flush=True,
            )
    ok = True
    for variant in VARIANTS:
        mine = [r for r in rounds if r.variant == variant]
        elapsed = [r.elapsed_s for r in mine]
        print(describe_median(f"{variant} time until all collected", elapsed, " s"))
        lost = [r.partial + r.missing for r in mine]
        print(describe_median(f"{variant} lost (partial + missing)", lost))
        taken = [r.incomplete_seen for r in mine]
        print(describe_median(f"{variant} incomplete folders taken", taken))
        if variant == "coursehub":
            ok = all(r.whole == args.students and r.incomplete_seen == 0 for r in mine)
    target = "coursehub: every submission collected whole in every repeat"
    print(f"target ({target}):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
