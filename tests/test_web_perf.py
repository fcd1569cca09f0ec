"""The course page's cost: a fixed number of queries, whatever the roster; multi-process serving.

Timings are measured by ``benchmarks/bench_web.py``, never asserted here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import psutil
import pytest
import requests

from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.readmodel import PAGE_SIZE
from coursehub.errors import UsageError
from coursehub.web.identity import Identity
from coursehub.web.serving import ServerPlan, plan_gunicorn_options, plan_workers
from coursehub.web.testing import (
    IDENTITIES,
    add_students,
    identity_headers,
    seed_web_catalog,
)
from helpers import counted_statements, free_port, wait_until

C = "/courses/mlmeca-2025/"
LEAD = identity_headers(Identity("mbuffat"))


def enrol(url: str, n_students: int) -> None:
    """Enrol ``n_students`` generated students (``s0000000``...) in the demo course."""
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            add_students(session, get_course(session, "mlmeca-2025"), n_students)
    finally:
        engine.dispose()


def page_statements(app, headers: dict[str, str], query: str = "") -> list[str]:
    """Return the statements one course page request runs (after a first, warming request)."""
    client = app.test_client()
    assert client.get(C + query, headers=headers).status_code == 200
    with counted_statements(app) as statements:
        response = client.get(C + query, headers=headers)
    assert response.status_code == 200
    return statements


@pytest.mark.parametrize("part", ["lead", "grader", "student", "admin"])
def test_course_page_queries_do_not_grow_with_the_roster(app, database_url, part):
    headers = LEAD if part == "lead" else identity_headers(IDENTITIES[part])
    small = page_statements(app, headers)
    enrol(database_url, 3 * PAGE_SIZE + 7)
    large = page_statements(app, headers)
    last_page = page_statements(app, headers, "?page=4")
    # those who may copy the course also read the years it may go to (one query)
    budget = 7 if part in ("lead", "admin") else 6
    assert len(small) == len(large) == len(last_page) <= budget
    assert not any("INSERT" in s or "UPDATE" in s for s in large)


def test_students_are_paged_by_last_name_with_their_group(app, database_url):
    enrol(database_url, 2 * PAGE_SIZE)  # Last00000... in groups B1-B4, before Lefèvre, Moreau...
    client = app.test_client()
    body = client.get(C + "?page=2", headers=LEAD).get_data(as_text=True)
    names = re.findall(r"<td>First\d+ (Last\d{5})</td>", body)
    assert names == [f"Last{i:05d}" for i in range(PAGE_SIZE, 2 * PAGE_SIZE)]
    assert "<td>s0000050@etu.example.org</td><td>B3</td>" in body
    assert f"Students ({2 * PAGE_SIZE + 4})" in body and "Page 2 of 3" in body
    assert 'rel="prev"' in body and 'rel="next"' in body


def test_course_page_out_of_range_pages_are_clamped(app, database_url):
    enrol(database_url, PAGE_SIZE)
    client = app.test_client()
    last = client.get(C + "?page=99", headers=LEAD).get_data(as_text=True)
    first = client.get(C + "?page=0", headers=LEAD).get_data(as_text=True)
    assert "Page 2 of 2" in last and 'rel="next"' not in last
    assert "Page 1 of 2" in first and 'rel="prev"' not in first


def test_course_page_shows_the_students_own_group_and_no_roster(app):
    body = app.test_client().get(C, headers=identity_headers(IDENTITIES["student"]))
    text = body.get_data(as_text=True)
    assert re.search(r"<dt>You</dt><dd>student, group \w+</dd>", text)
    assert "Students (" not in text and "p2500002" not in text


def test_course_page_of_a_stranger_is_refused_without_reading_the_roster(app):
    client = app.test_client()
    headers = identity_headers(IDENTITIES["other_teacher"])
    with counted_statements(app) as statements:
        assert client.get(C, headers=headers).status_code == 403
    assert len(statements) == 2  # the course, the user's own membership


# serving -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "cpus", "expected"),
    [("auto", 2.0, 2), ("auto", 0.5, 1), ("auto", 7.9, 7), ("1", 4.0, 1), ("3", 1.0, 3)],
)
def test_plan_workers(requested, cpus, expected):
    assert plan_workers(requested, cpus) == expected


@pytest.mark.parametrize("requested", ["0", "-2", "two", ""])
def test_plan_workers_refuses_bad_values(requested):
    with pytest.raises(UsageError, match="--workers"):
        plan_workers(requested, 2.0)


def test_plan_gunicorn_options():
    options = plan_gunicorn_options(ServerPlan("127.0.0.1", 8123, workers=2, threads=4))
    assert options["bind"] == ["127.0.0.1:8123"]
    assert (options["workers"], options["threads"]) == (2, 4)
    assert options["worker_class"] == "gthread" and options["preload_app"] is True


def test_serve_refuses_bad_workers_in_one_line(capsys):
    from coursehub.cli import main

    assert main(["web", "serve", "--workers", "none", "--dev-user", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coursehub: error: --workers") and err.count("\n") == 1


def test_serve_with_two_gunicorn_workers(sqlite_template, tmp_path):
    """``coursehub web serve --workers 2`` forks two processes that answer the course page."""
    import shutil

    shutil.copyfile(sqlite_template, tmp_path / "catalog.sqlite")
    url = f"sqlite:///{tmp_path / 'catalog.sqlite'}"
    seed_web_catalog(url)
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "coursehub",
        "web",
        "serve",
        "--port",
        str(port),
        "--workers",
        "2",
        "--threads",
        "2",
        "--dev-user",
        "mbuffat",
    ]
    env = {**os.environ, "COURSEHUB_DATABASE_URL": url}
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        response = wait_for(f"http://127.0.0.1:{port}{C}", server)
        assert response.status_code == 200 and "Students (4)" in response.text
        assert len(psutil.Process(server.pid).children()) == 2
    finally:
        server.send_signal(signal.SIGINT)  # gunicorn's quick shutdown (SIGTERM: graceful)
        out = server.communicate(timeout=30)[0].decode()
    assert server.returncode == 0, out
    assert "gunicorn, 2 processes" in out


def wait_for(url: str, server: subprocess.Popen[bytes], timeout_s: float = 60) -> requests.Response:
    """GET ``url`` once the server listens; fail if it exits or takes over ``timeout_s``."""

    def answer() -> requests.Response | None:
        if server.poll() is not None:
            pytest.fail(f"the server did not start (exit status {server.poll()})")
        try:
            return requests.get(url, timeout=10)
        except requests.ConnectionError:
            return None

    return wait_until(answer, timeout_s, interval_s=0.1, what=f"the server to answer {url}")
