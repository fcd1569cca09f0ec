"""One formgrader per course, as a JupyterHub service named after the course.

Following nbgrader's "Using nbgrader with JupyterHub" (0.9): the service
``<course_id>`` runs ``jupyterhub-singleuser`` in the course directory (it
reads ``nbgrader_config.py`` there), the group ``formgrade-<course_id>`` gets
``access:services!service=<course_id>`` (and ``list:services``, ``read:services`` of
it, for nbgrader's Course List), and every user server may ask the hub
for its own groups (role ``server`` with ``inherit``) so that nbgrader's
``JupyterHubAuthPlugin`` lists only the user's courses. A teacher of several
courses thus has one formgrader per course, each with its own gradebook
(nbgrader#1936, #1316).

Two ways to add a course's formgrader:

- at run time, :func:`register_formgrader` (``POST /hub/api/services/NAME``,
  JupyterHub 5.0+, token with ``admin:services``): the hub routes
  ``/services/<course_id>/`` to an external formgrader started outside the
  hub (the command is in :func:`formgrader_command`). JupyterHub has no API
  for roles, so the access role of the team group still comes from the
  configuration: render it with :func:`render_formgrader_config`;
- in the configuration, :func:`render_formgrader_config`, then a hub
  restart (nbgrader#1354).

The formgrader opens in its own browser tab (``formgrader_url``): its in-page
frame is blank with JupyterHub 4.1+ (nbgrader#1870).
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coursehub.grading.layout import CourseLayout

if TYPE_CHECKING:
    from coursehub.grading.formgrader.account import FormgraderAccount

#: First port of the formgrader services (one port per course, in course order).
BASE_PORT = 9900
#: The course app's variable listing the courses whose formgrader service the hub runs.
FORMGRADER_COURSES_VARIABLE = "COURSEHUB_FORMGRADER_COURSES"
#: This extension's module (its name in ``ServerApp.jpserver_extensions``).
GUARD_EXTENSION = "coursehub.grading.formgrader.guard"
#: Extensions of the environment turned off in a formgrader (Lab, notebook UI, terminals...).
DISABLED_EXTENSIONS = (
    "jupyterlab",
    "notebook",
    "jupyter_lsp",
    "jupyter_server_terminals",
    "jupyter_resource_usage",
    "nbgitpuller",
    "nbgrader.server_extensions.assignment_list",
    "nbgrader.server_extensions.course_list",
    "nbgrader.server_extensions.validate_assignment",
)
#: The formgrader's tornado setting that tells the guard to refuse nothing (a whole server).
FULL_SERVER_SETTING = "coursehub_formgrader_full_server"
#: A site's switch back to the whole Jupyter server in each formgrader (kernels, terminals, Lab).
FULL_SERVER_VARIABLE = "COURSEHUB_FORMGRADER_FULL_SERVER"


def formgrader_url(course_id: str, hub_prefix: str = "/") -> str:
    """Return the formgrader's address below the hub: ``/services/<course_id>/formgrader``."""
    return f"{hub_prefix.rstrip('/')}/services/{course_id}/formgrader"


def formgrader_command(
    python: str = sys.executable, allow_root: bool = False, full_server: bool = False
) -> list[str]:
    """Return the formgrader's command (``jupyterhub-singleuser`` with the nbgrader extension).

    The server serves the formgrader only
    (:mod:`coursehub.grading.formgrader.guard`): terminals off
    (``ServerApp.terminals_enabled``), kernels refused
    (``ServerApp.kernel_manager_class``), Lab, the notebook UI and nbgrader's
    student extensions off and the guard on (``ServerApp.jpserver_extensions``,
    jupyter_server's "Config file and command line options").
    ``full_server`` (a site's ``COURSEHUB_FORMGRADER_FULL_SERVER=1``,
    :func:`full_server_enabled`): the whole Jupyter server as nbgrader's
    documentation runs it, kernels, terminals and contents API included, for
    every member of the team; the guard then refuses nothing
    (``tornado_settings`` :data:`FULL_SERVER_SETTING`) but still sanitises
    students' outputs and sends submission files in the CSP sandbox.

    ``allow_root``: add ``--allow-root``, which jupyter-server needs to run as
    root (the demo in a container); a real formgrader runs as the course's grader.
    """
    command = [
        python,
        "-m",
        "jupyterhub.singleuser",
        "--ServerApp.default_url=/formgrader",
        f"--ServerApp.jpserver_extensions={GUARD_EXTENSION}=True",
    ]
    if full_server:
        command.append(f"--ServerApp.tornado_settings={FULL_SERVER_SETTING}=True")
    else:
        command += [
            "--ServerApp.terminals_enabled=False",
            f"--ServerApp.kernel_manager_class={GUARD_EXTENSION}.RefusingKernelManager",
            *(f"--ServerApp.jpserver_extensions={name}=False" for name in DISABLED_EXTENSIONS),
        ]
    return [*command, "--allow-root"] if allow_root else command


def full_server_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Return whether ``COURSEHUB_FORMGRADER_FULL_SERVER`` asks for the whole Jupyter server.

    ``1``, ``true`` or ``yes`` (any case): the formgrader keeps kernels,
    terminals, the contents API and Lab (:func:`formgrader_command`); unset
    or anything else: the formgrader only.
    """
    env = os.environ if environ is None else environ
    return env.get(FULL_SERVER_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def plan_service_model(
    course_id: str, url: str, api_token: str, title: str | None = None
) -> dict[str, Any]:
    """Return the body of ``POST /services/<course_id>`` for an external formgrader (pure).

    Its ``info["display_name"]`` is what the hub's Services menu shows
    (:mod:`coursehub.spawn.hubpages`): "Grading: <course title>", the
    course_id where no title is given.
    """
    display_name = f"Grading: {title or course_id}"
    return {
        "name": course_id,
        "url": url,
        "api_token": api_token,
        "oauth_no_confirm": True,
        "display": True,
        "info": {
            "coursehub": True,
            "kind": "formgrader",
            "course_id": course_id,
            "display_name": display_name,
        },
    }


def formgrader_link(
    course_id: str, environ: Mapping[str, str] | None = None, hub_prefix: str = "/"
) -> str | None:
    """Return the formgrader's address if the hub runs one for ``course_id``, else None.

    The course app cannot see the hub's configuration, so the courses whose
    formgrader service is configured are listed in ``COURSEHUB_FORMGRADER_COURSES``
    (comma-separated course ids, ``*`` for every course; unset: none) of
    the course app's environment; ``coursehub demo`` sets it. Without it a
    link to ``/services/<course_id>/formgrader`` would answer 404.
    """
    env = os.environ if environ is None else environ
    listed = {c.strip() for c in env.get(FORMGRADER_COURSES_VARIABLE, "").split(",")}
    if course_id in listed or "*" in listed:
        return formgrader_url(course_id, hub_prefix)
    return None


def render_formgrader_config(
    layouts: Sequence[CourseLayout],
    base_port: int = BASE_PORT,
    python: str = "python3",
    ports: Sequence[int] | None = None,
    allow_root: bool = False,
    full_server: bool = False,
    accounts: Mapping[str, FormgraderAccount] | None = None,
) -> str:
    """Return the ``jupyterhub_config.py`` lines that run a formgrader per course (pure).

    Each service runs ``python -m jupyterhub.singleuser`` (nbgrader's
    formgrader extension, enabled when nbgrader is installed) in its course
    directory, on port ``ports[i]`` (default ``base_port + i``), with its
    token from the environment variable ``FORMGRADER_TOKEN_<COURSE_ID>``
    (upper case, ``-`` as ``_``), so no secret is written in the file.
    ``allow_root`` and ``full_server`` as in :func:`formgrader_command`.

    ``accounts`` (course_id -> :class:`~coursehub.grading.formgrader.account.FormgraderAccount`,
    from :func:`coursehub.grading.formgrader.account.prepare_formgrader`, as
    root): that course's formgrader runs through its sandbox plan as its own
    account (:func:`formgrader_service_command`), with ``HOME`` its home and
    :data:`coursehub.sandbox.env.SANDBOX_REQUIRED_VAR` set; ``allow_root``
    is then ignored for it.
    A managed service gets, of the hub's environment, only the variables of
    ``LocalProcessSpawner``'s default ``env_keep`` (``PATH``, ``PYTHONPATH``,
    ``LANG``...: JupyterHub's ``services/service.py``, ``_ServiceSpawner``,
    not configured by ``c.Spawner``) and its own ``JUPYTERHUB_*``: no hub
    secret, no other service's token.

    Raises
    ------
    ValueError
        If ``ports`` is given with another length than ``layouts``.
    """
    ports = list(ports) if ports is not None else [base_port + i for i in range(len(layouts))]
    if len(ports) != len(layouts):
        raise ValueError(f"{len(layouts)} courses but {len(ports)} ports")
    lines = [
        "# --- nbgrader: one formgrader service per course (written by coursehub) ---",
        "import os",
        "",
        "c.JupyterHub.services += [",
    ]
    accounts = accounts or {}
    for layout, port in zip(layouts, ports, strict=True):
        run = accounts.get(layout.course_id)
        if run is None:
            command = formgrader_command(python, allow_root, full_server)
        else:
            command = formgrader_service_command(run, python, full_server)
        lines += [
            "    {",
            f"        'name': {layout.course_id!r},",
            f"        'url': 'http://127.0.0.1:{port}',",
            f"        'command': {command!r},",
            f"        'cwd': {str(layout.course_dir)!r},",
            f"        'api_token': os.environ[{token_variable(layout.course_id)!r}],",
            "        'oauth_no_confirm': True,",
        ]
        if run is not None:
            lines.append(f"        'environment': {formgrader_environment(run)!r},")
        lines.append("    },")
    lines += ["]", "c.JupyterHub.load_roles += ["]
    for layout in layouts:
        cid = layout.course_id
        # the team also lists and reads the service: nbgrader's Course List (JupyterHubAuthPlugin)
        # finds it in GET /hub/api/services with the server's token (role "server", inherit)
        lines += [
            f"    {{'name': 'formgrade-{cid}', 'groups': ['formgrade-{cid}'],",
            f"     'scopes': ['access:services!service={cid}', 'list:services!service={cid}',",
            f"                'read:services!service={cid}']}},",
            f"    {{'name': 'formgrader-{cid}', 'services': [{cid!r}],",
            "     'scopes': ['list:users', 'read:users', 'read:users:groups']},",
        ]
    lines += ["    {'name': 'server', 'scopes': ['inherit']},", "]"]
    return "\n".join(lines) + "\n"


def formgrader_service_command(
    run: FormgraderAccount, python: str = sys.executable, full_server: bool = False
) -> list[str]:
    """Return the formgrader's command run through its sandbox plan, as its own account (pure).

    :func:`formgrader_command` (without ``--allow-root``) inside
    :func:`coursehub.sandbox.command.plan_sandbox_command` of ``run.plan``.
    """
    from coursehub.sandbox.command import plan_sandbox_command

    return plan_sandbox_command(formgrader_command(python, False, full_server), run.plan)


def formgrader_environment(run: FormgraderAccount) -> dict[str, str]:
    """Return the variables a formgrader run as its own account gets from its service (pure).

    ``HOME`` (its home: Jupyter's runtime and config files), ``USER``,
    :data:`coursehub.sandbox.env.SANDBOX_REQUIRED_VAR` (its "autograde"
    button refuses to start a kernel it cannot sandbox) and
    ``PYTHONSAFEPATH`` (the course directory, its working directory, is not
    put on its import path).
    """
    from coursehub.sandbox.env import SANDBOX_REQUIRED_VAR

    return {
        "HOME": str(run.home),
        "USER": run.account.name,
        "LOGNAME": run.account.name,
        SANDBOX_REQUIRED_VAR: "1",
        # it runs in the course directory: no module left there is imported (Python's -P)
        "PYTHONSAFEPATH": "1",
    }


def token_variable(course_id: str) -> str:
    """Return the environment variable holding the formgrader token of ``course_id``."""
    return "FORMGRADER_TOKEN_" + course_id.upper().replace("-", "_").replace(".", "_")


@dataclass(frozen=True)
class Registration:
    """Outcome of :func:`register_formgrader`: ``registered`` or ``restart_needed``, and why."""

    course_id: str
    registered: bool
    api_token: str
    message: str


def register_formgrader(
    client: Any, course_id: str, url: str, title: str | None = None
) -> Registration:
    """Register the course's formgrader as an external hub service at run time.

    Parameters
    ----------
    client
        A :class:`coursehub.hub.hubclient.HubClient` whose token has
        ``admin:services``.
    url
        Where the formgrader listens (``http://127.0.0.1:PORT``).
    title
        The course's title, shown in the Services menu as "Grading: <title>".

    Returns
    -------
    Registration
        ``registered=True`` with the service token to start the formgrader
        with; ``False`` when the hub cannot add services at run time (before
        5.0, or a token without ``admin:services``): the message then says
        to render the configuration and restart the hub. An existing
        service of that name counts as registered (token unknown: "").
    """
    from coursehub.hub.hubclient import HubError

    token = secrets.token_hex(32)
    try:
        client.create_service(course_id, plan_service_model(course_id, url, token, title))
    except HubError as exc:
        if exc.status == 409:
            return Registration(course_id, True, "", f"service {course_id} already registered")
        if exc.status in (403, 404, 405):
            return Registration(course_id, False, "", _restart_message(course_id, exc.message))
        raise
    return Registration(course_id, True, token, f"service {course_id} registered at {url}")


def _restart_message(course_id: str, reason: str) -> str:
    return (
        f"the hub refused to add service {course_id} at run time ({reason}): add the output of "
        f"`coursehub grading hub-config` to jupyterhub_config.py and restart the hub"
    )
