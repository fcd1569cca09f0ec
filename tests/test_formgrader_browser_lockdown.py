"""A course's formgrader service on a real hub serves the formgrader only, students' HTML inert.

The hub runs the formgrader services coursehub renders
(:func:`coursehub.grading.formgrader.service.render_formgrader_config`) for two
courses; a grader of the first signs in. The formgrader answers, its API
too; kernels, sessions, terminals, the contents API, Lab, the tree and
nbgrader's notebook validation are refused; the service's environment holds
no hub secret and no other course's token. A submission whose outputs and
markdown carry a student's ``<script>`` shows in the manual grading page,
in real Chromium, without the script running; a student's HTML file in the
submission is sent in the CSP sandbox: its script cannot read the cookies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import nbformat
import psutil
import pytest
import requests

from coursehub.contract import hub_id_for_db_url, hub_id_of_data_dir
from coursehub.grading.formgrader.account import FormgraderAccount, prepare_formgraders
from coursehub.grading.formgrader.service import render_formgrader_config, token_variable
from coursehub.grading.layout import CourseLayout, ensure_course, make_layout
from helpers import free_port
from hubfixture import RunningHub, find_proxy

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
COURSE, OTHER = "fglock-2025", "fgother-2025"
#: The real assignment autograded from the formgrader's button, and its two students.
GRADED, HONEST, HOSTILE_STUDENT = "ps2", "p2501010", "p2501666"
GRADER, STRANGER = "chtestfggrader", "chtestfgstranger"
STUDENT, ASSIGNMENT, NOTEBOOK = "p2501004", "ps1", "ps1"
#: What a hub secret looks like in the hub's environment (the demo's names).
HUB_SECRET = "COURSEHUB_DEMO_PASSWORD"
STUDENT_SCRIPT = "<script>document.title='BRK-XSS '+location.pathname</script>"
STUDENT_HTML = (
    "<html><head><title>submitted</title></head><body><p id=shown>a student's page</p>"
    "<script>try{document.title='COOKIE:'+document.cookie}catch(e){document.title='NO-COOKIE'}"
    "</script></body></html>"
)

pytestmark = pytest.mark.integration


def student_notebook() -> nbformat.NotebookNode:
    """An autograded notebook whose outputs and markdown carry the student's scripts."""
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("display(HTML(...))", execution_count=1)
    code.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/html": f"<b class='brkxss'>shown</b>{STUDENT_SCRIPT}"}
        ),
        nbformat.v4.new_output(
            "display_data", data={"application/javascript": "document.title='BRK-JS'"}
        ),
        nbformat.v4.new_output(
            "display_data",
            data={"text/markdown": "md <img src=x onerror=\"document.title='BRK-MDOUT'\">"},
        ),
        nbformat.v4.new_output(
            "display_data",
            data={
                "image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'>"
                "<script>document.title='BRK-SVG'</script></svg>"
            },
        ),
    ]
    markdown = nbformat.v4.new_markdown_cell(
        "answer <script>document.title='BRK-MD'</script> "
        "<img src=x onerror=\"document.title='BRK-IMG'\">"
    )
    nb.cells = [markdown, code]
    return nb


def add_submission(layout: CourseLayout) -> None:
    """A gradebook with one submission of ``STUDENT`` and its autograded files."""
    from nbgrader.api import Gradebook

    with warnings.catch_warnings(), Gradebook(layout.db_url) as gradebook:
        warnings.simplefilter("ignore")  # nbgrader's own SQLAlchemy warnings
        gradebook.add_assignment(ASSIGNMENT)
        gradebook.add_notebook(NOTEBOOK, ASSIGNMENT)
        gradebook.add_grade_cell("q1", NOTEBOOK, ASSIGNMENT, max_score=1, cell_type="code")
        gradebook.add_student(STUDENT, first_name="Ana", last_name="Lyse")
        gradebook.add_submission(ASSIGNMENT, STUDENT)
    source = layout.course_dir / "source" / ASSIGNMENT
    source.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), source / f"{NOTEBOOK}.ipynb")
    folder = layout.course_dir / "autograded" / STUDENT / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(student_notebook(), folder / f"{NOTEBOOK}.ipynb")
    (folder / "page.html").write_text(STUDENT_HTML)


def graded_assignment(layout: CourseLayout, workdir: Path) -> None:
    """A real assignment :data:`GRADED` with an honest and a hostile submission, collected."""
    from coursehub.grading.assignments import (
        add_assignment,
        collect,
        generate_assignment,
        release_assignment,
    )
    from coursehub.grading.autograde.gradebook import ensure_students
    from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
    from test_autograde_sandbox import HOSTILE
    from test_grading_e2e import CORRECT, answer_assignment

    add_assignment(layout, GRADED, [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
    generate_assignment(layout, GRADED)
    release_assignment(layout, GRADED)
    other_gradebook = workdir / "courses" / OTHER / "gradebook.db"
    hub_db = workdir / "jupyterhub.sqlite"
    targets = [str(layout.gradebook_path), str(other_gradebook), str(hub_db), "/etc/shadow"]
    hostile = textwrap.indent(HOSTILE.format(targets=targets, port=9), "    ")
    for student, body in ((HONEST, CORRECT), (HOSTILE_STUDENT, hostile + CORRECT)):
        answer_assignment(layout, workdir, GRADED, student, body)
    collect(layout, GRADED)
    ensure_students(layout, [HONEST, HOSTILE_STUDENT])


def extra_config(workdir: Path) -> tuple[str, dict[str, FormgraderAccount]]:
    """The formgraders' hub configuration; as root, each runs as its own course's account."""
    layouts = [
        make_layout(c, workdir / "courses", workdir / "exchange", single_user=True)
        for c in (COURSE, OTHER)
    ]
    for layout in layouts:
        ensure_course(layout)
    add_submission(layouts[0])
    graded_assignment(layouts[0], workdir)
    accounts = prepare_formgraders(layouts, hub_id_of_data_dir(str(workdir)))
    formgraders = render_formgrader_config(
        layouts,
        python=sys.executable,
        ports=[free_port(), free_port()],
        allow_root=os.geteuid() == 0,
        accounts=accounts,
    )
    return f"\n{formgraders}\n", accounts


def remove_accounts(accounts: dict[str, FormgraderAccount]) -> None:
    for run in accounts.values():
        subprocess.run(["userdel", run.account.name], check=False, capture_output=True)
        subprocess.run(["groupdel", run.account.name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def fg_hub(tmp_path_factory):
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    workdir = tmp_path_factory.mktemp("fglock")
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(workdir, proxy, ports)
    hub.extra_config, accounts = extra_config(workdir)
    hub.formgrader_accounts = accounts
    values = {token_variable(COURSE): "own-token", token_variable(OTHER): "other-token"}
    values[HUB_SECRET] = "hub-secret"
    names = list(values)
    os.environ.update(values)
    try:
        hub.start()
        headers = {"Authorization": f"token {hub.admin_token}"}
        for user in (GRADER, STRANGER):
            requests.post(f"{hub.api_url}/users/{user}", headers=headers, timeout=30)
        answer = requests.post(
            f"{hub.api_url}/groups/formgrade-{COURSE}",
            headers=headers,
            json={"users": [GRADER]},
            timeout=30,
        )
        assert answer.status_code in (201, 409), answer.text
        answer = requests.post(  # the role's group exists since the start: 409 above
            f"{hub.api_url}/groups/formgrade-{COURSE}/users",
            headers=headers,
            json={"users": [GRADER]},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        yield hub
    finally:
        hub.stop()
        remove_accounts(accounts)
        for name in names:
            os.environ.pop(name, None)


def hub_session(hub: RunningHub, user: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{hub.url}/hub/login", timeout=30)
    answer = session.post(
        f"{hub.url}/hub/login",
        data={
            "username": user,
            "password": hub.password,
            "_xsrf": session.cookies.get("_xsrf", ""),
        },
        allow_redirects=False,
        timeout=60,
    )
    assert answer.status_code == 302, answer.text
    return session


def formgrader_session(hub: RunningHub, user: str) -> tuple[requests.Session, str]:
    """A signed-in session that went through the formgrader's OAuth; and its ``_xsrf``."""
    deadline = time.monotonic() + 90
    while True:  # the managed service may still be starting
        session = hub_session(hub, user)
        answer = session.get(f"{hub.url}/services/{COURSE}/formgrader/", timeout=60)
        if answer.status_code in (200, 403) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert answer.status_code == 200, f"{answer.status_code} {answer.text[:300]}\n{hub.log_tail()}"
    xsrf = next(
        (c.value for c in session.cookies if c.name == "_xsrf" and COURSE in (c.path or "")), ""
    )
    return session, xsrf


def service_url(path: str) -> str:
    return f"/services/{COURSE}/{path}"


def test_a_grader_gets_the_formgrader_but_no_kernel_terminal_contents_lab_or_tree(fg_hub):
    session, xsrf = formgrader_session(fg_hub, GRADER)
    headers = {"X-XSRFToken": xsrf}
    base = fg_hub.url
    assignments = session.get(base + service_url("formgrader/api/assignments"), timeout=60)
    assert assignments.status_code == 200, assignments.text
    assert ASSIGNMENT in assignments.text
    refused = {
        ("POST", "api/kernels"): {"name": "python3"},
        ("POST", "api/sessions"): {"path": "x.ipynb", "type": "notebook", "kernel": {}},
        ("POST", "api/terminals"): None,
        ("GET", "api/kernels"): None,
        ("GET", "api/kernelspecs"): None,
        ("GET", "api/contents"): None,
        ("GET", "api/contents/nbgrader_config.py"): None,
        ("PUT", "api/contents/x.py"): {"type": "file", "format": "text", "content": "x"},
        ("GET", "files/nbgrader_config.py"): None,
        ("GET", "lab"): None,
        ("GET", "tree"): None,
        ("GET", "notebooks/x.ipynb"): None,
        ("GET", "terminals/1"): None,
        ("POST", "assignments/validate"): None,
    }
    for (method, path), body in refused.items():
        answer = session.request(
            method, base + service_url(path), json=body, headers=headers, timeout=60
        )
        assert answer.status_code in (403, 404), (method, path, answer.status_code, answer.text)
    course_list = session.get(
        base + service_url("lab?formgrader=true"), allow_redirects=False, timeout=60
    )
    assert course_list.status_code == 302
    assert course_list.headers["Location"].endswith(service_url("formgrader/"))


def test_a_member_of_another_team_is_refused_the_formgrader(fg_hub):
    session = hub_session(fg_hub, STRANGER)
    answer = session.get(fg_hub.url + service_url("formgrader/"), timeout=60)
    assert answer.status_code == 403


def formgrader_processes(course_id: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "cwd"]):
        cmdline = process.info["cmdline"] or []
        if "jupyterhub.singleuser" in cmdline and (process.info["cwd"] or "").endswith(course_id):
            found.append(process)
    return found


def test_the_formgraders_environment_holds_no_hub_secret_nor_another_courses_token(fg_hub):
    formgrader_session(fg_hub, GRADER)
    processes = formgrader_processes(COURSE)
    assert processes, "no formgrader process found"
    environ = processes[0].environ()
    assert environ.get("JUPYTERHUB_SERVICE_NAME") == COURSE
    for name in (HUB_SECRET, token_variable(OTHER), token_variable(COURSE)):
        assert name not in environ
    assert environ["JUPYTERHUB_API_TOKEN"] == "own-token"  # its own service token only
    for value in ("other-token", "hub-secret", fg_hub.admin_token, fg_hub.token, fg_hub.password):
        assert not any(value in v for v in environ.values())


def submission_id(session: requests.Session, hub: RunningHub) -> str:
    listed = session.get(
        hub.url + service_url(f"formgrader/api/submitted_notebooks/{ASSIGNMENT}/{NOTEBOOK}"),
        timeout=60,
    )
    assert listed.status_code == 200, listed.text
    return next(s["id"] for s in listed.json() if s["student"] == STUDENT)


def test_the_manual_grading_page_shows_the_students_outputs_with_their_scripts_as_text(fg_hub):
    session, _ = formgrader_session(fg_hub, GRADER)
    sid = submission_id(session, fg_hub)
    page = session.get(fg_hub.url + service_url(f"formgrader/submissions/{sid}/"), timeout=60)
    assert page.status_code == 200, page.text[:500]
    assert "shown" in page.text
    for script in ("<script>document.title='BRK", "<img src=x onerror", "document.title='BRK-JS'"):
        assert script not in page.text  # the markdown's <img onerror> is text: &lt;img ...
    assert "&lt;script&gt;document.title='BRK-XSS" in page.text


def browser_titles(hub: RunningHub, paths: list[str]) -> list[tuple[str, str]]:
    """Sign in with Chromium, open each path; return (title, text of the body) of each."""
    from playwright.sync_api import sync_playwright

    seen = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(f"{hub.url}/hub/login")
            page.fill("input[name=username]", GRADER)
            page.fill("input[name=password]", hub.password)
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url("**/hub/**", timeout=60_000)
            for path in paths:
                page.goto(hub.url + path)
                page.wait_for_load_state("load")
                page.wait_for_timeout(1500)
                seen.append((page.title(), page.inner_text("body")))
        finally:
            browser.close()
    return seen


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")
def test_a_students_script_runs_neither_in_the_grading_page_nor_with_the_teachers_cookies(fg_hub):
    pytest.importorskip("playwright.sync_api")
    session, _ = formgrader_session(fg_hub, GRADER)
    sid = submission_id(session, fg_hub)
    files = session.get(
        fg_hub.url + service_url(f"formgrader/submissions/{sid}/page.html"), timeout=60
    )
    assert files.status_code == 200
    csp = files.headers.get("Content-Security-Policy", "")
    assert csp.startswith("sandbox") and "allow-same-origin" not in csp
    (grading_title, grading_body), (file_title, file_body) = browser_titles(
        fg_hub,
        [
            service_url(f"formgrader/submissions/{sid}/"),
            service_url(f"formgrader/submissions/{sid}/page.html"),
        ],
    )
    assert "BRK" not in grading_title
    assert "shown" in grading_body and "answer" in grading_body
    assert file_title == "NO-COOKIE"
    assert "a student's page" in file_body


@pytest.mark.root
def test_as_root_the_formgrader_runs_as_its_courses_account_without_capabilities(fg_hub):
    formgrader_session(fg_hub, GRADER)
    run = fg_hub.formgrader_accounts[COURSE]
    hub_id = hub_id_for_db_url(f"sqlite:///{fg_hub.workdir / 'jupyterhub.sqlite'}")
    assert run.account.name == f"fg-{hub_id}-{COURSE}"  # a host-wide name: the hub's id in it
    [process] = formgrader_processes(COURSE)
    assert process.uids().real == process.uids().effective == run.account.uid
    assert process.gids().real == run.account.gid and run.account.uid != 0
    status = Path(f"/proc/{process.pid}/status").read_text()
    assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status
    assert process.environ()["HOME"] == str(run.home)


@pytest.mark.root
def test_the_formgraders_account_reaches_its_own_course_only(fg_hub):
    """What the account may open on the host: its gradebook, never another course's or the hub's."""
    run = fg_hub.formgrader_accounts[COURSE]
    own = fg_hub.workdir / "courses" / COURSE / "gradebook.db"
    other = fg_hub.workdir / "courses" / OTHER / "gradebook.db"
    probe = (
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path, 'rb').read(1); print('open', path)\n"
        "    except OSError:\n"
        "        print('refused', path)\n"
    )
    from coursehub.sandbox.command import plan_sandbox_command

    hub_db = fg_hub.workdir / "jupyterhub.sqlite"
    paths = [str(own), str(other), str(hub_db), str(run.home.parent.parent / "nbgrader_config.py")]
    done = subprocess.run(
        plan_sandbox_command([sys.executable, "-c", probe, *paths], run.plan),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=run.home,
    )
    assert done.returncode == 0, done.stderr
    seen = dict(line.split(" ", 1)[::-1] for line in done.stdout.splitlines())
    assert seen == {paths[0]: "open", paths[1]: "refused", paths[2]: "refused", paths[3]: "open"}


@pytest.mark.slow
def test_the_autograde_button_grades_the_honest_and_gives_the_hostile_nothing(fg_hub):
    """nbgrader's button (POST .../api/submission/<a>/<s>/autograde) in the live formgrader."""
    from coursehub.grading.demo import DEMO_ASSIGNMENT

    session, xsrf = formgrader_session(fg_hub, GRADER)
    results = {}
    for student in (HONEST, HOSTILE_STUDENT):
        answer = session.post(
            fg_hub.url + service_url(f"formgrader/api/submission/{GRADED}/{student}/autograde"),
            headers={"X-XSRFToken": xsrf},
            timeout=300,
        )
        assert answer.status_code == 200, answer.text[:500]
        results[student] = answer.json()
    assert all(r["success"] for r in results.values()), results
    # each kernel forked from the formgrader's own kernel fork server, in the same sandbox
    assert all("forked) in" in r["log"] for r in results.values()), results
    autograded = fg_hub.workdir / "courses" / COURSE / "autograded"
    listed = session.get(
        fg_hub.url + service_url(f"formgrader/api/submissions/{GRADED}"), timeout=60
    ).json()
    scores = {s["student"]: s["score"] for s in listed}
    assert scores[HONEST] == scores[HOSTILE_STUDENT] == 4.0
    notebook = nbformat.read(
        autograded / HOSTILE_STUDENT / GRADED / f"{DEMO_ASSIGNMENT}.ipynb", as_version=4
    )
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    found = json.loads(printed.split("FOUND", 1)[1].splitlines()[0])
    assert found == {"env": [], "proc": [], "readable": [], "writable": [], "net": False}
