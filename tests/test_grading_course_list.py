"""A course lead's nbgrader "Course List" on a real hub lists their course's formgrader.

The Course List of JupyterLab (nbgrader's ``course_list`` server extension,
``GET /user/<name>/formgraders``) asks the hub, with the server's own token,
for the user's groups (``formgrade-<course_id>``, through ``JupyterHubAuthPlugin``
of the servers' ``nbgrader_config.py``) and for the hub's services (one
formgrader service per course, named after it). This runs the hub
configuration coursehub writes for that (``render_formgrader_config``,
``render_student_config``, the team's Jupyter config directories), with a
formgrader service for one course, a lead in its team group and a server
started for the lead, then reads the lead's Course List as Lab does.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
import requests

from coursehub.grading.formgrader.service import render_formgrader_config, token_variable
from coursehub.grading.layout import ensure_course, make_layout, render_student_config
from coursehub.spawn.jupytertools import TEAM, plan_config_path
from helpers import free_port
from hubfixture import RunningHub, find_proxy

COURSE = "fhlist-2025"
LEAD = "chtestfhlead"

pytestmark = pytest.mark.integration


def extra_config(workdir: Path, nbgrader_dir: Path) -> str:
    layout = make_layout(COURSE, workdir / "courses", workdir / "exchange", single_user=True)
    ensure_course(layout)
    (nbgrader_dir / "nbgrader_config.py").write_text(
        render_student_config(layout.exchange_root, single_user=True)
    )
    allow_root = os.geteuid() == 0
    formgraders = render_formgrader_config(
        [layout], python=sys.executable, ports=[free_port()], allow_root=allow_root
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
    os.environ[token_variable(COURSE)] = "formgrader-token-" + COURSE.replace("-", "")
    try:
        hub.start()
        yield hub
    finally:
        hub.stop()
        os.environ.pop(token_variable(COURSE), None)


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


def test_a_leads_course_list_shows_the_formgrader_of_their_course(course_hub):
    hub = course_hub
    assert api(hub, "POST", f"/users/{LEAD}").status_code in (201, 409)
    group = api(hub, "POST", f"/groups/formgrade-{COURSE}", json={"users": [LEAD]})
    assert group.status_code in (201, 409), group.text
    api(hub, "POST", f"/groups/formgrade-{COURSE}/users", json={"users": [LEAD]})
    token = api(hub, "POST", f"/users/{LEAD}/tokens", json={"note": "course list"})
    assert token.status_code == 201, token.text
    start_server(hub, LEAD)
    answer = requests.get(
        f"{hub.url}/user/{LEAD}/formgraders",
        headers={"Authorization": f"token {token.json()['token']}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    listed = answer.json()
    assert listed["success"], listed["value"]
    hub_courses = [c for c in listed["value"] if c["kind"] == "jupyterhub"]
    assert [c["course_id"] for c in hub_courses] == [COURSE], listed
    assert hub_courses[0]["url"].endswith(f"/services/{COURSE}/lab?formgrader=true")
