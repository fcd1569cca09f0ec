"""Chromium through the whole hub path of an exam: sign-in, the exam spawn, the clock, a save,
a second browser, the proctor's end, a refused save, the bell, its receipt and the stop.

Real: the hub of ``coursehub demo --exam-servers`` in a temporary data
directory (:class:`coursehub.demo.hub.DemoHub` with ``exam_servers=True``:
JupyterHub, configurable-http-proxy, the course app as the hub service, the
demo's shared password), the demo course's released assignment as the exam
(:func:`coursehub.demo.examhub.create_demo_exam`, as
``benchmarks/bench_exam_spawn.py`` makes it), the student's exam start in
the catalog, the spawn that makes the server an exam server in its exam home,
Debian's Chromium through Playwright, the commands ``coursehub exam end``,
``bell`` (which stops the server through the hub), ``show`` and ``collect``
on the demo's nbgrader exchange. Stand-ins:
the exam start is recorded with the catalog function rather than the
student's click on the course app, and the demo book's background build is
left out (it would only compete for the CPUs). The hub and its servers run as
this account, as in the demo.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from appbrowser import BROWSER_MARKS
from coursehub.bench.examspawn import exam_server_problem
from coursehub.catalog.exams import Receipt
from coursehub.cli import main
from coursehub.demo.examhub import (
    create_demo_exam,
    hub_processes,
    leftovers,
    server_processes,
    start_exams,
)
from coursehub.errors import UsageError
from coursehub.examroom.home import plan_exam_home
from coursehub.grading.demo import DEMO_ASSIGNMENT
from coursehub.grading.examsubmit import file_sha256, manifest_sha256, verify_collected
from coursehub.grading.layout import layout_from_env
from helpers import free_port

NOTEBOOK = f"{DEMO_ASSIGNMENT}.ipynb"
CLOCK = "#coursehub-exam-clock"
RUNNING = re.compile(rf"^{DEMO_ASSIGNMENT}: (\d+:)?\d+:\d\d left")
#: What the student types in the answer cell.
TYPED = "# typed in Chromium: 42"
#: What the student types once their time is up (refused).
LATE = "# typed after the end"
#: What the clock's poll may take to show a moved end: the poll, the cache, a margin.
FOLLOW_MS = 40_000
#: What JupyterLab and its server may take to load on a busy 2-CPU machine.
LOAD_MS = 120_000
#: A GET from the page with JupyterLab's XSRF header (the ``_xsrf`` cookie).
FETCH = """async (url) => {
  const xsrf = document.cookie.match(/\\b_xsrf=([^;]*)/);
  const answer = await fetch(url, {headers: xsrf ? {"X-XSRFToken": xsrf[1]} : {}});
  return {status: answer.status, body: await answer.text()};
}"""

pytestmark = [*BROWSER_MARKS, pytest.mark.slow]


@dataclass
class ExamHub:
    """The running demo hub, its exam and its one student."""

    hub: Any
    data_dir: Path
    database_url: str
    course_id: str
    student: str
    seen: dict[int, Any]

    @property
    def api(self) -> str:
        return f"{self.hub.url}/hub/api"

    @property
    def exam(self) -> str:
        return f"{self.course_id}/{DEMO_ASSIGNMENT}"

    @property
    def home(self) -> Path:
        root = str(self.data_dir / "exams")
        return Path(plan_exam_home(root, self.course_id, DEMO_ASSIGNMENT, self.student))

    @property
    def notebook(self) -> Path:
        return self.home / self.course_id / DEMO_ASSIGNMENT / NOTEBOOK

    def user(self) -> dict:
        headers = {"Authorization": f"token {self.hub.secrets.service_token}"}
        answer = requests.get(f"{self.api}/users/{self.student}", headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def note_processes(self) -> None:
        for proc in hub_processes(self.hub):
            self.seen.setdefault(proc.pid, proc)


@pytest.fixture
def exam_hub(monkeypatch) -> Iterator[ExamHub]:
    """The demo hub with exam servers, one demo student whose exam started; no process left."""
    from coursehub.demo.hub import DemoHub
    from coursehub.demo.setup import find_proxy, grading_layouts, prepare_catalog

    try:
        find_proxy()
    except UsageError:
        pytest.skip("configurable-http-proxy not found (make setup)")
    pytest.importorskip("playwright.sync_api")
    monkeypatch.setattr("coursehub.demo.book.start_demo_book", lambda *args: False)
    data_dir = Path(tempfile.mkdtemp(prefix="coursehub-exam-hub-"))
    try:
        database_url, _ = prepare_catalog(data_dir)
        course_id = grading_layouts(data_dir)[0].course_id
        [student] = create_demo_exam(database_url, course_id, 1)
        start_exams(database_url, course_id, [student])
        courses, exchange = data_dir / "nbgrader" / "courses", data_dir / "nbgrader" / "exchange"
        monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(courses))
        monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(exchange))
        monkeypatch.setenv("COURSEHUB_GRADING_SINGLE_USER", "1")
        hub = DemoHub(data_dir, free_port(), "127.0.0.1", exam_servers=True)
        hub.start(database_url)
        run = ExamHub(hub, data_dir, database_url, course_id, student, {})
        try:
            run.note_processes()
            hub.sync(database_url)
            yield run
            run.note_processes()
        finally:
            hub.stop()
        assert leftovers(list(run.seen.values()), data_dir) == []
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def sign_in(browser, run: ExamHub):
    """A new browser context signs in as the student; return its page."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(f"{run.hub.url}/hub/login", timeout=60_000)
    page.fill("input[name=username]", run.student)
    page.fill("input[name=password]", run.hub.secrets.password)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(re.compile(r".*/(hub/(home|spawn).*|user/.*)$"), timeout=60_000)
    return context, page


def open_lab(page, run: ExamHub) -> None:
    """Start the student's server from the hub's spawn page (or find it running); wait for
    JupyterLab and the exam clock."""
    page.goto(f"{run.hub.url}/hub/spawn/{run.student}", timeout=60_000)
    lab = f"**/user/{run.student}/lab**"
    submit = page.locator("#spawn_form input[type=submit], #spawn_form button[type=submit]")
    if "/hub/spawn" in page.url and submit.count():
        submit.first.click()
    page.wait_for_url(lab, timeout=120_000)
    page.locator(CLOCK).wait_for(timeout=120_000)


def clock_status(page, run: ExamHub) -> dict:
    """The exam server's clock status, asked from the page as the clock asks it."""
    url = f"/user/{run.student}/coursehub/exam/status"
    answer = page.evaluate(FETCH, url)
    assert answer["status"] == 200, answer
    return json.loads(answer["body"])


def counts_down(page) -> None:
    """The clock's text is a running countdown and changes within a few seconds."""
    clock = page.locator(CLOCK)
    first = clock.inner_text(timeout=30_000)
    assert RUNNING.match(first), first
    page.wait_for_function(
        "([sel, text]) => document.querySelector(sel).innerText !== text",
        arg=[CLOCK, first],
        timeout=10_000,
    )


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out + err


def test_a_student_sits_an_exam_through_the_hub_in_chromium_and_the_bell_takes_the_saved_work(
    exam_hub, browser, capsys, monkeypatch
):
    run = exam_hub
    monkeypatch.setenv("EXAM_HUB_TOKEN", run.hub.secrets.service_token)
    ends_at = sit_and_save(browser, run)
    come_back(browser, run, ends_at)
    saved = end_and_refuse_a_save(browser, run, capsys)
    ring_the_bell(run, capsys, saved)


def sit_and_save(browser, run: ExamHub) -> str:
    """Sign in, start the exam server, open the notebook, type and save; return the end."""
    context, page = sign_in(browser, run)
    open_lab(page, run)
    run.note_processes()
    # the server the hub started is the exam server, its root folder the exam home
    server = server_processes(list(run.seen.values())).get(run.student)
    environ = server.environ() if server else None
    assert exam_server_problem(environ, run.home, run.exam, NOTEBOOK) == ""
    counts_down(page)
    first = clock_status(page, run)
    assert 175 * 60 < first["seconds_left"] <= 180 * 60, first
    # JupyterLab opens in the exam's folder (the exam server's default URL) with the notebook
    assert page.url.split("?")[0].endswith(f"/user/{run.student}/lab/tree/{run.exam}")
    listed(page, NOTEBOOK).wait_for(timeout=LOAD_MS)
    crumbs = page.locator(".jp-FileBrowser .jp-BreadCrumbs").inner_text()
    assert re.sub(r"\s+", "", crumbs) == f"/{run.exam}/", crumbs
    # the file browser's root is the exam home: the course, the exam, its notebook
    page.locator(".jp-FileBrowser .jp-BreadCrumbs-home").click()
    for name in (run.course_id, DEMO_ASSIGNMENT, NOTEBOOK):
        listed(page, name).dblclick(timeout=LOAD_MS)
    answer = page.locator(".jp-CodeCell", has_text="YOUR CODE HERE").first
    type_and_save(page, answer, TYPED)
    wait_for_text(run.notebook, TYPED)
    run.note_processes()  # the notebook's kernel too
    context.close()
    return first["ends_at"]


def come_back(browser, run: ExamHub, ends_at: str) -> None:
    """A new browser context: the same server still running, the same end, the work there."""
    pid = run.user()["servers"][""]["state"]["pid"]
    context, page = sign_in(browser, run)
    open_lab(page, run)
    assert run.user()["servers"][""]["state"]["pid"] == pid
    counts_down(page)
    assert clock_status(page, run)["ends_at"] == ends_at
    if not page.locator(".jp-NotebookPanel").count():  # the workspace not restored yet
        page.goto(f"{run.hub.url}/user/{run.student}/lab/tree/{run.exam}/{NOTEBOOK}")
    page.locator(".jp-Cell", has_text=TYPED).wait_for(timeout=60_000)
    context.close()


def end_and_refuse_a_save(browser, run: ExamHub, capsys) -> bytes:
    """A proctor ends the student's time: the clock says so and a save is refused; return
    the notebook as saved before the end."""
    status, out = run_cli(capsys, "exam", "end", run.course_id, DEMO_ASSIGNMENT,
                          "--student", run.student, "--by", "mbuffat",
                          "--database-url", run.database_url)  # fmt: skip
    assert status == 0, out
    context, page = sign_in(browser, run)
    page.goto(f"{run.hub.url}/user/{run.student}/lab/tree/{run.exam}/{NOTEBOOK}")
    page.locator(CLOCK, has_text="Time is up").wait_for(timeout=FOLLOW_MS)
    saved = run.notebook.read_bytes()
    type_and_save(page, page.locator(".jp-CodeCell", has_text=TYPED).first, LATE)
    page.locator(".jp-Dialog", has_text="your exam time ended").wait_for(timeout=30_000)
    assert run.notebook.read_bytes() == saved
    context.close()
    return saved


def ring_the_bell(run: ExamHub, capsys, saved: bytes) -> None:
    """The bell submits the saved notebook with a receipt and stops the server; the collect
    takes that same file."""
    course_assignment = (run.course_id, DEMO_ASSIGNMENT)
    work_dir = str(run.data_dir / "exams" / run.course_id / DEMO_ASSIGNMENT / "{student}")
    status, out = run_cli(capsys, "exam", "bell", *course_assignment, "--work-dir", work_dir,
                          "--hub-url", run.api, "--token-env", "EXAM_HUB_TOKEN",
                          "--database-url", run.database_url)  # fmt: skip
    assert status == 0, out
    digest = file_sha256(run.notebook)
    assert hashlib.sha256(saved).hexdigest() == digest
    assert TYPED in saved.decode() and LATE not in saved.decode()
    assert f"  {digest}  {NOTEBOOK}\n" in out
    assert f"{run.student}: exam server stopped" in out
    status, shown = run_cli(capsys, "exam", "show", *course_assignment, "--json",
                            "--database-url", run.database_url)  # fmt: skip
    receipt = {s["username"]: s for s in json.loads(shown)["sittings"]}[run.student]["receipt"]
    assert receipt["files"] == {NOTEBOOK: digest} and receipt["final"] is True
    assert receipt["sha256"] == manifest_sha256({NOTEBOOK: digest})
    assert f"SHA-256 {receipt['sha256']}" in out
    status, out = run_cli(capsys, "exam", "collect", *course_assignment,
                          "--database-url", run.database_url)  # fmt: skip
    assert status == 0, out
    kept = Receipt(datetime.fromisoformat(receipt["submitted_at"]), receipt["submission"],
                   receipt["sha256"], receipt["files"])  # fmt: skip
    layout = layout_from_env(run.course_id)
    assert verify_collected(layout, DEMO_ASSIGNMENT, run.student, kept) == ""
    deadline = time.monotonic() + 60
    while run.user()["servers"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert run.user()["servers"] == {}


def listed(page, name: str):
    """The visible item ``name`` of the file browser's listing."""
    return page.locator(".jp-DirListing-content .jp-DirListing-item:visible", has_text=name)


def type_and_save(page, cell, text: str) -> None:
    """Type ``text`` on a new line at the end of ``cell``'s editor, then save (Ctrl+S)."""
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.press("Enter")
    page.keyboard.type(text)
    page.keyboard.press("Control+s")


def wait_for_text(path: Path, text: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert text in path.read_text()
