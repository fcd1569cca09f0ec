"""Benchmark autograding: seconds per submission, one runner job each, in a temporary course.

Releases the demo assignment (``pendulum_energy``) in a temporary course
directory and exchange, has ``--students`` students fetch and submit the
correct answer, collects, then autogrades them (``--threads`` per job, 2 GiB
memory limit) and prints the wall-clock time of each step and per
submission. Each job starts a fresh interpreter, imports nbgrader and
starts a kernel: that start-up is most of the time.

Run: ``.venv/bin/python benchmarks/bench_autograde.py --students 4``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import nbformat

from coursehub.grading.assignments import (
    add_assignment,
    collect,
    generate_assignment,
    release_assignment,
)
from coursehub.grading.autograde import AutogradeLimits, autograde_assignment
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.exchange import fetch_assignment, submit_assignment
from coursehub.grading.layout import ensure_course, make_layout
from coursehub.runner import LocalBackend, SlotPool

ANSWER = (
    "    a, b, c = (M1 + M2) * L1**2, M2 * L2**2, M2 * L1 * L2\n"
    "    kinetic = a * omega1**2 / 2 + b * omega2**2 / 2"
    " + c * omega1 * omega2 * np.cos(theta1 - theta2)\n"
    "    return kinetic - (M1 + M2) * G * L1 * np.cos(theta1) - M2 * G * L2 * np.cos(theta2)"
)


def submit_all(layout, root: Path, students: list[str]) -> None:
    """Fetch, answer and submit as each student, each from a folder of their own."""
    for student in students:
        home = root / "home" / student
        folder = fetch_assignment(
            layout.exchange_root, layout.course_id, DEMO_ASSIGNMENT, student, home
        )
        path = folder / f"{DEMO_ASSIGNMENT}.ipynb"
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            cell.source = cell.source.replace(
                "    # YOUR CODE HERE\n    raise NotImplementedError()", ANSWER
            )
        nbformat.write(notebook, path)
        submit_assignment(layout.exchange_root, layout.course_id, DEMO_ASSIGNMENT, student, home)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-autograde-") as tmp:
        root = Path(tmp)
        layout = make_layout("bench-2025", root / "courses", root / "exchange", single_user=True)
        started = time.perf_counter()
        ensure_course(layout)
        add_assignment(layout, DEMO_ASSIGNMENT, [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
        generate_assignment(layout, DEMO_ASSIGNMENT)
        release_assignment(layout, DEMO_ASSIGNMENT)
        released = time.perf_counter()
        students = [f"s{i:04d}" for i in range(args.students)]
        submit_all(layout, root, students)
        collect(layout, DEMO_ASSIGNMENT)
        collected = time.perf_counter()
        backend = LocalBackend(
            root / "runs", SlotPool(root / "slots", args.threads), use_cgroups=False
        )
        limits = AutogradeLimits(n_threads=args.threads, mem_limit=2 * 2**30, timeout_s=600)
        outcomes = autograde_assignment(layout, DEMO_ASSIGNMENT, students, limits, backend)
        graded = time.perf_counter()
    scores = sorted({o.score for o in outcomes})
    print(f"setup + generate + release: {released - started:.2f} s")
    print(f"{args.students} fetch + submit, collect: {collected - released:.2f} s")
    per_submission = (graded - collected) / max(1, args.students)
    print(f"autograde: {graded - collected:.2f} s, {per_submission:.2f} s per submission")
    print(f"scores: {scores}")


if __name__ == "__main__":
    main()
