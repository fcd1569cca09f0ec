"""A demo hub with an exam, for the exam spawn benchmark and the exam's hub browser test.

``benchmarks/bench_exam_spawn.py`` and ``tests/test_exam_hub_browser.py``
run a :class:`coursehub.demo.hub.DemoHub` in a temporary data directory
prepared as ``coursehub demo`` prepares it
(:func:`coursehub.demo.setup.prepare_catalog`), with exam servers on:
:func:`create_demo_exam` gives the demo course an exam of its released
assignment, :func:`start_exams` records students' starts as their own
starts do, :func:`server_processes` finds each student's server among the
hub's processes (:func:`hub_processes`), and :func:`leftovers` says which
processes of the run are still alive once the hub is stopped (the spawn
benchmark's check too, ``benchmarks/bench_spawn.py``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from coursehub.catalog.connect import open_catalog
from coursehub.catalog.courses import get_course
from coursehub.catalog.db import session_scope
from coursehub.catalog.exams import create_exam, get_exam, list_sittings, start_exam
from coursehub.catalog.examtime import Window
from coursehub.grading.demo import DEMO_ASSIGNMENT

if TYPE_CHECKING:
    from coursehub.demo.hub import DemoHub

#: The exam's time zone.
ZONE = "Europe/Paris"
#: The demo course's lead, who creates the exam.
LEAD = "mbuffat"


def create_demo_exam(database_url: str, course_id: str, n_students: int) -> list[str]:
    """Create the exam of ``course_id``; return ``n_students`` of its students (topped up).

    The exam is the demo's released assignment; it opened 5 minutes ago,
    lasts 3 hours, ends in 4 hours. A roster shorter than ``n_students`` is
    topped up with generated students (:func:`coursehub.web.testing.add_students`).
    """
    from coursehub.web.testing import add_students

    now = datetime.now(UTC)
    window = Window(now - timedelta(minutes=5), 180, now + timedelta(hours=4), ZONE)
    with open_catalog(database_url) as engine, session_scope(engine) as session:
        course = get_course(session, course_id)
        exam = create_exam(session, course, DEMO_ASSIGNMENT, window, LEAD)
        students = [s.username for s in list_sittings(session, course, exam)]
        if len(students) < n_students:
            add_students(session, course, n_students - len(students), groups=4)
            students = [s.username for s in list_sittings(session, course, exam)]
    return students[:n_students]


def start_exams(database_url: str, course_id: str, usernames: list[str]) -> float:
    """Record each student's exam start (each at its own now); return the seconds it took."""
    began = time.monotonic()
    with open_catalog(database_url) as engine, session_scope(engine) as session:
        course = get_course(session, course_id)
        exam = get_exam(session, course, DEMO_ASSIGNMENT)
        for username in usernames:
            start_exam(session, course, exam, username, datetime.now(UTC))
    return time.monotonic() - began


def hub_processes(hub: DemoHub) -> list[psutil.Process]:
    """The hub process of a started ``DemoHub`` and all its descendants (proxy, services,
    single-user servers)."""
    assert hub.process is not None
    root = psutil.Process(hub.process.pid)
    return [root, *root.children(recursive=True)]


def server_processes(processes: list[psutil.Process]) -> dict[str, psutil.Process]:
    """``{username: process}`` of the single-user servers among the hub's descendants.

    A server is a process with ``JUPYTERHUB_USER`` in its environment whose
    parent has none (its kernels and helpers have the parent's).
    """
    users: dict[int, tuple[str, int]] = {}
    for proc in processes:
        try:
            users[proc.pid] = (proc.environ().get("JUPYTERHUB_USER", ""), proc.ppid())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return {
        user: psutil.Process(pid)
        for pid, (user, parent) in users.items()
        if user and users.get(parent, ("", 0))[0] != user
    }


def leftovers(processes: list[psutil.Process], data_dir: Path) -> list[str]:
    """Processes of the run still alive: recorded ones, or any working under ``data_dir``."""
    alive = {p.pid: p for p in processes if p.is_running()}
    for proc in psutil.process_iter(["pid", "cwd"]):
        if (proc.info["cwd"] or "").startswith(str(data_dir)):
            alive[proc.pid] = proc
    found = []
    for pid, proc in sorted(alive.items()):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{pid} {' '.join(proc.cmdline()[:3])}")
        except psutil.NoSuchProcess:
            pass
    return found
