"""An exam server's spawner traits (pure): its home, no terminal, exam kernels, the unit's network.

:func:`plan_exam_traits` returns what a server started during a student's
running exam gets on top of the course profile
(:func:`coursehub.spawn.profiles.spawner_override`), in the shape of
JupyterHub's ``Spawner`` traits:

- ``notebook_dir``: the exam home (:mod:`coursehub.examroom.home`); the
  file browser and the contents API see nothing outside it (jupyter-server's
  ``ServerApp.root_dir``);
- ``args``: the admin's, then ``--ServerApp.terminals_enabled=False``
  (jupyter-server) and the exam kernels
  (:class:`coursehub.examroom.kernelmanager.ExamKernelManager`: no network,
  shell escapes refused, the exam's allowed imports); command-line options
  win over configuration files (traitlets), so a file the student writes
  cannot turn them back;
- ``args`` also load the exam clock: the server extension
  :mod:`coursehub.examroom.clock` and the JupyterLab extension shipped in
  :data:`LABEXTENSIONS` (``LabApp.extra_labextensions_path``, so that an
  editable install, which installs no data files, finds it too);
- ``args`` turn off every other server extension the server's Jupyter
  configuration enables (:func:`plan_extension_switches`): only JupyterLab,
  the clock and JupyterHub's own extension load. nbgrader's ``validate_assignment``
  would run the student's notebook in a kernel of its own, outside the exam
  kernels; its ``assignment_list`` fetches and submits other assignments;
  nbgitpuller pulls repositories. It also makes a start cheaper (about a
  third of jupyter-server's CPU time with this environment's extensions);
- ``environment``: ``HOME`` is the exam home, no user site-packages
  (``PYTHONNOUSERSITE``), ``COURSEHUB_EXAM`` = ``<course_id>/<assignment>``
  and ``COURSEHUB_EXAM_URL``, the course app's root URL the clock asks;
- under SystemdSpawner, ``unit_extra_properties`` ``IPAddressDeny=any`` and
  ``IPAddressAllow=`` the hub's addresses: the unit's sockets reach nothing
  else over IP (systemd.resource-control(5), "IPAddressAllow=,
  IPAddressDeny="; it needs cgroup v2 with BPF). When the proxy and other
  students' servers share the hub's address (one host, ``127.0.0.1``), this
  does not keep one server from another: the kernels' own network namespaces
  do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The environment variable naming the exam a server runs for (``<course_id>/<assignment>``).
EXAM_VAR = "COURSEHUB_EXAM"
#: The exam kernels' manager, as jupyter-server's MultiKernelManager loads it.
KERNEL_MANAGER = "coursehub.examroom.kernelmanager.ExamKernelManager"
#: The exam clock's server extension (:mod:`coursehub.examroom.clock`).
CLOCK_EXTENSION = "coursehub.examroom.clock"
#: The folder of the exam clock's built JupyterLab extension (``@coursehub/exam-clock``).
LABEXTENSIONS = Path(__file__).resolve().parent / "labextensions"
#: Where JupyterLab keeps a student's settings and workspaces in the exam home (its
#: defaults are under ``JUPYTER_CONFIG_DIR``, which an exam server gets read-only).
LAB_USER_DIR = ".jupyter/lab"
#: The server extensions an exam server loads: JupyterLab, the clock, and JupyterHub's
#: single-user extension (``jupyterhub-singleuser`` enables it itself, JupyterHub 5).
EXAM_SERVER_EXTENSIONS = frozenset(
    {"jupyterlab", CLOCK_EXTENSION, "jupyterhub.singleuser.extension"}
)
#: The course app's root URL in an exam server's environment (:mod:`coursehub.examroom.clock`).
COURSE_APP_VAR = "COURSEHUB_EXAM_URL"


@dataclass(frozen=True)
class ExamSeat:
    """A student's running exam, as the spawn sees it.

    ``home``: the exam home; ``allowed_imports``: top-level module names,
    comma-separated ("" for no list); ``ends_at``: the student's end, ISO 8601
    (shown in the log only); ``course_app_url``: the course app's root URL
    the exam clock asks ("" for none: no clock).
    """

    course_id: str
    assignment: str
    home: Path
    allowed_imports: str = ""
    ends_at: str = ""
    course_app_url: str = ""


def plan_extension_switches(configured: Iterable[str]) -> list[str]:
    """Return the options turning off each of ``configured`` not in :data:`EXAM_SERVER_EXTENSIONS`.

    ``configured``: the module names of ``ServerApp.jpserver_extensions`` in the
    server's Jupyter configuration (:func:`configured_server_extensions`). A name
    given on the command line wins over the configuration files for that name
    (jupyter-server ``ServerApp.init_server_extension_config``).
    """
    off = sorted(set(configured) - EXAM_SERVER_EXTENSIONS)
    return [f"--ServerApp.jpserver_extensions={name}=False" for name in off]


def configured_server_extensions(config_path: Sequence[str]) -> list[str]:
    """Return the server extension names set in the Jupyter config directories ``config_path``.

    Every name set there, enabled or not, from each directory's
    ``jupyter_server_config.json`` and ``jupyter_server_config.d/*.json``
    (jupyter-server's ``ExtensionConfigManager``); a directory that does not
    exist adds nothing.
    """
    from jupyter_server.extension.config import ExtensionConfigManager

    manager = ExtensionConfigManager(read_config_path=list(config_path))
    return sorted(manager.get_jpserver_extensions())


def plan_exam_args(
    seat: ExamSeat, hidden: Sequence[str] = (), configured: Iterable[str] = ()
) -> list[str]:
    """Return the jupyter-server options of an exam server (after the admin's ``args``).

    ``configured``: server extensions the server's configuration sets
    (:func:`plan_extension_switches` turns off those an exam does not need).
    """
    args = [
        "--ServerApp.terminals_enabled=False",
        f"--MultiKernelManager.kernel_manager_class={KERNEL_MANAGER}",
        f"--ExamKernelManager.exam_home={seat.home}",
        f"--ExamKernelManager.allowed_imports={seat.allowed_imports}",
        f"--ServerApp.jpserver_extensions={CLOCK_EXTENSION}=True",
        f"--LabApp.extra_labextensions_path={LABEXTENSIONS}",
        f"--LabApp.user_settings_dir={seat.home / LAB_USER_DIR / 'user-settings'}",
        f"--LabApp.workspaces_dir={seat.home / LAB_USER_DIR / 'workspaces'}",
    ]
    args += [f"--ExamKernelManager.hidden={path}" for path in hidden]
    return [*args, *plan_extension_switches(configured)]


def plan_unit_network(hub_addresses: Sequence[str]) -> dict[str, str]:
    """Return the systemd unit properties allowing IP only to ``hub_addresses`` (pure).

    Raises
    ------
    ValueError
        No address given (the server would not reach the hub).
    """
    if not hub_addresses:
        raise ValueError("an exam server needs the hub's address in IPAddressAllow=")
    return {"IPAddressDeny": "any", "IPAddressAllow": " ".join(hub_addresses)}


def plan_exam_traits(
    seat: ExamSeat,
    kind: str,
    admin_args: Sequence[str],
    hub_addresses: Sequence[str] = ("localhost",),
    hidden: Sequence[str] = (),
    configured: Iterable[str] = (),
) -> dict[str, Any]:
    """Return the spawner traits of an exam server, to merge over the course profile's (pure).

    Dict traits (``environment``, ``unit_extra_properties``) hold only the
    exam's entries: the caller merges them into the profile's. ``configured``:
    the server extensions of the server's configuration (:func:`plan_exam_args`).
    """
    traits: dict[str, Any] = {
        "notebook_dir": str(seat.home),
        "default_url": f"/lab/tree/{seat.course_id}/{seat.assignment}",
        "args": [*admin_args, *plan_exam_args(seat, hidden, configured)],
        "environment": {
            "HOME": str(seat.home),
            "PYTHONNOUSERSITE": "1",
            EXAM_VAR: f"{seat.course_id}/{seat.assignment}",
        },
    }
    if seat.course_app_url:
        traits["environment"][COURSE_APP_VAR] = seat.course_app_url
    if kind == "systemd":
        traits["unit_extra_properties"] = plan_unit_network(hub_addresses)
    return traits
