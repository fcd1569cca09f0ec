"""Which Jupyter tools a user's server shows: nbgrader's instructor tools for teams only.

nbgrader 0.9 installs, for everyone, server extensions
(``nbgrader.server_extensions.{formgrader,course_list,assignment_list,validate_assignment}``)
and JupyterLab plugins (``@jupyter/nbgrader:{formgrader,create-assignment,course-list,
assignment-list,validate-assignment,menu}``). Its documentation ("Installation",
"Disabling extensions") turns the instructor ones off with
``jupyter server extension disable nbgrader.server_extensions.formgrader`` and
``jupyter labextension disable @jupyter/nbgrader:formgrader``, which write
``ServerApp.jpserver_extensions`` in ``jupyter_server_config.json`` and
``disabledExtensions`` in ``labconfig/page_config.json`` of a Jupyter config
directory. Those are per machine or per environment, not per user, so the
spawner does the same per server: :func:`plan_config_path` puts a config
directory shipped with coursehub first on the server's ``JUPYTER_CONFIG_PATH``
(read before the environment's own directories, after the user's ``~/.jupyter``:
``jupyter_core.paths.jupyter_config_path``):

- ``jupyter_config/student``: the instructor extensions off (formgrader, course
  list, create assignment); the assignment list and validation stay;
- ``jupyter_config/team`` (team members and hub admins): nbgrader's local
  formgrader off (its server extension and its Lab plugin, the Nbgrader menu's
  "Formgrader"), the course list and create assignment on. Each course's
  formgrader is a hub service (nbgrader "Using nbgrader with JupyterHub",
  multiple classes, which disables the local formgrader in user servers):
  a local one would be an empty course in the teacher's home, and the Course
  List (``GET /user/<name>/formgraders``) would show it as an unnamed
  ``local`` entry (jupyter/nbgrader#1857). The list is then exactly the
  services of the person's team groups;
- ``jupyter_config/exam`` (an exam server, first on its path): the JupyterLab
  extensions whose server side an exam server does not load
  (:data:`EXAM_OFF_LAB_EXTENSIONS`; :func:`coursehub.examroom.server.plan_extension_switches`);
- ``jupyter_config/common`` (every server): JupyterLab's news and update
  check off (``@jupyterlab/apputils-extension:announcements``, which asks
  "Would you like to get notified about official Jupyter news?"; ``LabApp.news_url``
  None) and a "Courses" entry in the File menu that opens the course app
  (``help:open``, a JupyterLab command, declared in the main menu's ``menus``
  setting through ``overrides.json``, see :data:`COURSE_APP_PATH`).

This only hides menus: what protects grades is that a student's server runs
as the student, who cannot read the course directory (docs/security.md), and
that the formgrader services admit the team group only. A student may turn
the extensions back on in their own ``~/.jupyter`` and gets nothing more.

The directories are read where the server runs: coursehub must be installed
at the same path there as on the hub (local, systemd, a Slurm cluster with a
shared install). Elsewhere (a Kubernetes image with another layout) the
directory does not exist, Jupyter ignores it, and the menus show.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from coursehub.contract import parse_course_group

#: Tools of a course team member (or a hub admin) and of everyone else.
TEAM, STUDENT = "team", "student"
#: nbgrader's local formgrader: its server extension and its JupyterLab plugin
#: (nbgrader 0.9.6 ``jupyter-config``, ``@jupyter/nbgrader``'s lab extension).
FORMGRADER_SERVER_EXTENSION = "nbgrader.server_extensions.formgrader"
FORMGRADER_LAB_PLUGIN = "@jupyter/nbgrader:formgrader"
#: nbgrader's instructor server extensions (nbgrader 0.9.6 ``jupyter-config``).
INSTRUCTOR_SERVER_EXTENSIONS = (
    FORMGRADER_SERVER_EXTENSION,
    "nbgrader.server_extensions.course_list",
)
#: nbgrader's instructor JupyterLab plugins (ids in ``@jupyter/nbgrader``'s lab extension).
INSTRUCTOR_LAB_PLUGINS = (
    FORMGRADER_LAB_PLUGIN,
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
)
#: What a team's config directory turns off: the local formgrader (the formgraders are services).
TEAM_OFF_SERVER_EXTENSIONS = (FORMGRADER_SERVER_EXTENSION,)
TEAM_OFF_LAB_PLUGINS = (FORMGRADER_LAB_PLUGIN,)
#: The config directory shared by every server.
COMMON = "common"
#: The config directory put first on an exam server's path.
EXAM = "exam"
#: Whole JupyterLab extensions an exam server turns off (``disabledExtensions`` takes an
#: extension's name for all its plugins, JupyterLab "Enabling and Disabling Extensions"):
#: their server extensions are not loaded there, so their panels and buttons would fail.
EXAM_OFF_LAB_EXTENSIONS = (
    "@jupyter/nbgrader",
    "@jupyter-server/resource-usage",
    "@jupyter-notebook/lab-extension",
)
#: JupyterLab's news and update-check plugin (``@jupyterlab/apputils-extension``).
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
#: Where the File menu's "Courses" entry leads (the course app service, hub base URL "/").
COURSE_APP_PATH = "/services/coursehub/"
#: The menu entry's label.
COURSE_APP_LABEL = "Courses"


def plan_tools(group_names: Iterable[str], admin: bool = False) -> str:
    """Return :data:`TEAM` for a hub admin or a member of a course team, else :data:`STUDENT`.

    ``group_names`` are the user's hub groups; team groups are
    ``formgrade-<course_id>`` (:func:`coursehub.contract.team_group`).
    """
    if admin:
        return TEAM
    for name in group_names:
        parsed = parse_course_group(name)
        if parsed is not None and parsed[0] == "team":
            return TEAM
    return STUDENT


def config_dir(name: str) -> str:
    """Return the path of the shipped config directory ``name`` (common, student, team, exam).

    Raises
    ------
    ValueError
        If ``name`` is not a shipped directory.
    """
    path = resources.files("coursehub.spawn").joinpath("jupyter_config", name)
    if not path.is_dir():
        raise ValueError(f"no Jupyter config directory {name!r} in coursehub.spawn")
    return str(path)


def plan_config_path(tools: str, current: str | None = None, exam: bool = False) -> str:
    """Return the server's ``JUPYTER_CONFIG_PATH``: coursehub's directories, then ``current``.

    Parameters
    ----------
    tools
        :data:`TEAM` or :data:`STUDENT` (:func:`plan_tools`).
    current
        The value the admin configured (e.g. the demo's nbgrader directory), kept after ours.
    exam
        An exam server: :data:`EXAM`'s directory comes first.

    Raises
    ------
    ValueError
        If ``tools`` is neither.
    """
    if tools not in (TEAM, STUDENT):
        raise ValueError(f"tools must be {TEAM!r} or {STUDENT!r}, got {tools!r}")
    dirs = [*([config_dir(EXAM)] if exam else []), config_dir(tools), config_dir(COMMON)]
    return os.pathsep.join([*dirs, *([current] if current else [])])


#: Directory -> the JupyterLab plugins it disables.
DISABLED_LAB_PLUGINS = {
    STUDENT: INSTRUCTOR_LAB_PLUGINS,
    TEAM: TEAM_OFF_LAB_PLUGINS,
    COMMON: (NEWS_PLUGIN,),
    EXAM: EXAM_OFF_LAB_EXTENSIONS,
}


def render_page_config(directory: str) -> dict[str, Any]:
    """Return ``labconfig/page_config.json`` of a directory: the disabled JupyterLab plugins.

    ``directory``: :data:`STUDENT`, :data:`TEAM`, :data:`COMMON` or :data:`EXAM`.
    """
    return {"disabledExtensions": dict.fromkeys(DISABLED_LAB_PLUGINS[directory], True)}


def render_server_config(directory: str) -> dict[str, Any]:
    """Return ``jupyter_server_config.json`` of a directory (student, team: extensions off)."""
    if directory == COMMON:
        return {"LabApp": {"news_url": None}}
    off = INSTRUCTOR_SERVER_EXTENSIONS if directory == STUDENT else TEAM_OFF_SERVER_EXTENSIONS
    return {"ServerApp": {"jpserver_extensions": dict.fromkeys(off, False)}}


def render_overrides() -> dict[str, Any]:
    """Return JupyterLab's ``overrides.json``: the File menu's "Courses" entry.

    Menu entries are declared in ``@jupyterlab/mainmenu-extension:plugin``'s
    ``menus`` setting (JupyterLab 4 "Interface customization"); ``help:open``
    opens ``url`` (in a new browser tab with ``newBrowserTab``).
    """
    item = {
        "command": "help:open",
        "args": {"url": COURSE_APP_PATH, "text": COURSE_APP_LABEL, "newBrowserTab": True},
        "rank": 0.5,
    }
    return {
        "@jupyterlab/mainmenu-extension:plugin": {
            "menus": [{"id": "jp-mainmenu-file", "items": [item]}]
        }
    }


def shipped_files() -> Mapping[str, dict[str, Any]]:
    """Return ``relative path -> JSON`` of every file under ``jupyter_config`` (what ships)."""
    return {
        "common/labconfig/page_config.json": render_page_config(COMMON),
        "common/jupyter_server_config.json": render_server_config(COMMON),
        "common/lab-settings/overrides.json": render_overrides(),
        "student/labconfig/page_config.json": render_page_config(STUDENT),
        "student/jupyter_server_config.json": render_server_config(STUDENT),
        "team/labconfig/page_config.json": render_page_config(TEAM),
        "team/jupyter_server_config.json": render_server_config(TEAM),
        "exam/labconfig/page_config.json": render_page_config(EXAM),
    }
