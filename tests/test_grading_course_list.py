"""A course lead's nbgrader "Course List" on a real hub lists exactly their course's formgrader.

The Course List of JupyterLab (nbgrader's ``course_list`` server extension,
``GET /user/<name>/formgraders``) asks the hub, with the server's own token,
for the user's groups (``formgrade-<course_id>``, through ``JupyterHubAuthPlugin``
of the servers' ``nbgrader_config.py``) and for the hub's services (one
formgrader service per course, named after it). This runs the hub
configuration coursehub writes for that (``render_formgrader_config``,
``render_student_config``, the team's Jupyter config directories), with a
formgrader service for each of two courses, a lead in the first one's team
group and a student of the second, and a server started for the lead,
then reads the lead's Course List as Lab does: the first course's formgrader
only, no unnamed ``local`` formgrader of the lead's own server
(jupyter/nbgrader#1857), and the lead's assignment list offers both courses.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
import requests

from coursehub.grading.assignments import add_assignment, generate_assignment, release_assignment
from coursehub.grading.demo import DEMO_ASSIGNMENT, demo_source_dir
from coursehub.grading.formgrader.service import render_formgrader_config, token_variable
from coursehub.grading.layout import ensure_course, make_layout
from coursehub.grading.studentconfig import render_student_config
from coursehub.spawn.jupytertools import TEAM, plan_config_path
from helpers import free_port
from hubfixture import RunningHub, find_proxy

COURSE = "fhlist-2025"
#: The course the lead studies in (a student there, in its ``nbgrader-`` group).
STUDIED = "fhlistb-2025"
LEAD = "chtestfhlead"
PS = "ps1"

pytestmark = pytest.mark.integration


def extra_config(workdir: Path, nbgrader_dir: Path) -> str:
    layouts = [
        make_layout(course, workdir / "courses", workdir / "exchange", single_user=True)
        for course in (COURSE, STUDIED)
    ]
    for layout in layouts:
        ensure_course(layout)
        add_assignment(layout, PS, [demo_source_dir() / f"{DEMO_ASSIGNMENT}.ipynb"])
        generate_assignment(layout, PS)
        release_assignment(layout, PS)
    (nbgrader_dir / "nbgrader_config.py").write_text(
        render_student_config(layouts[0].exchange_root, single_user=True)
    )
    allow_root = os.geteuid() == 0
    formgraders = render_formgrader_config(
        layouts, python=sys.executable, ports=[free_port(), free_port()], allow_root=allow_root
    )
    config_path = plan_config_path(TEAM, str(nbgrader_dir))
    return f"""
c.Spawner.environment = {{"JUPYTER_CONFIG_PATH": {config_path!r}}}
# the test service makes a token for the lead, to read the Course List as Lab does
c.JupyterHub.load_roles.append(
    {{"name": "test-tokens", "scopes": ["tokens"], "services": ["coursehub-test"]}}
)
{formgraders}
"""


@pytest.fixture(scope="module")
def course_hub(tmp_path_factory):
    proxy = find_proxy()
    if proxy is None:
        pytest.skip("configurable-http-proxy not found (make setup)")
    workdir = tmp_path_factory.mktemp("courselist")
    nbgrader_dir = workdir / "nbgrader-jupyter"
    nbgrader_dir.mkdir()
    ports = {name: free_port() for name in ("public", "hub", "proxy_api")}
    hub = RunningHub(workdir, proxy, ports)
    hub.extra_config = extra_config(workdir, nbgrader_dir)
    for course in (COURSE, STUDIED):
        os.environ[token_variable(course)] = "formgrader-token-" + course.replace("-", "")
    try:
        hub.start()
        yield hub
    finally:
        hub.stop()
        for course in (COURSE, STUDIED):
            os.environ.pop(token_variable(course), None)


def api(hub: RunningHub, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"token {hub.admin_token}"}
    return requests.request(method, hub.api_url + path, headers=headers, timeout=60, **kwargs)


def start_server(hub: RunningHub, user: str) -> None:
    answer = api(hub, "POST", f"/users/{user}/server")
    assert answer.status_code in (201, 202), answer.text
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        model = api(hub, "GET", f"/users/{user}").json()
        if model.get("servers", {}).get("", {}).get("ready"):
            return
        time.sleep(0.5)
    raise AssertionError(f"the server of {user} did not start:\n{hub.log_tail()}")


def add_to_group(hub: RunningHub, group: str, user: str) -> None:
    answer = api(hub, "POST", f"/groups/{group}", json={"users": [user]})
    assert answer.status_code in (201, 409), answer.text
    api(hub, "POST", f"/groups/{group}/users", json={"users": [user]})


def read_list(hub: RunningHub, token: str, path: str) -> list:
    """GET ``/user/<LEAD>/<path>`` as Lab does; return the listed ``value``."""
    answer = requests.get(
        f"{hub.url}/user/{LEAD}/{path}", headers={"Authorization": f"token {token}"}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    listed = answer.json()
    assert listed["success"], listed["value"]
    return listed["value"]


def test_a_leads_course_list_is_exactly_the_formgrader_of_their_course(course_hub):
    hub = course_hub
    assert api(hub, "POST", f"/users/{LEAD}").status_code in (201, 409)
    add_to_group(hub, f"formgrade-{COURSE}", LEAD)
    add_to_group(hub, f"nbgrader-{STUDIED}", LEAD)
    token = api(hub, "POST", f"/users/{LEAD}/tokens", json={"note": "course list"})
    assert token.status_code == 201, token.text
    start_server(hub, LEAD)
    secret = token.json()["token"]
    # nbgrader's course_list extension: no "local" formgrader of the lead's own server
    assert read_list(hub, secret, "formgraders") == [
        {
            "course_id": COURSE,
            "url": f"{hub.url}/services/{COURSE}/lab?formgrader=true",
            "kind": "jupyterhub",
        }
    ]
    # nbgrader's assignment_list extension: the courses with released assignments
    assert read_list(hub, secret, "courses") == [COURSE, STUDIED]
