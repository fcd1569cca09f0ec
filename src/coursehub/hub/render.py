"""A complete, commented hub configuration for a real deployment, rendered (pure).

:func:`render_hub_config` (pure) fills the templates in
``coursehub/hub/templates``: ``jupyterhub_config.py.j2`` for the ``systemd``,
``local`` and ``slurm`` spawners (and for ``coursehub demo``), or the Zero to
JupyterHub Helm values ``z2jh-values.yaml.j2`` for ``kubernetes``. Each holds
the authenticator, the spawner with course profiles
(:class:`coursehub.spawn.spawner.CourseProfiles`), the course app as a
hub-managed service with its role and scopes, the idle culler, the usage
ingester (local spawners) and ``concurrent_spawn_limit``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from coursehub.contract import (
    DEFAULT_PROFILE,
    MAX_BUSY_S,
    NO_COURSE_CHOICES,
    SERVER_ARG,
    SPAWNER_KINDS,
    CourseProfile,
)
from coursehub.errors import UsageError
from coursehub.resources.units import format_mem

#: The course app's name in the hub's Services menu.
COURSE_APP_DISPLAY_NAME = "Courses"
#: Path of the course app's LTI launch API below its service URL (coursehub.web.api.lti).
LTI_LAUNCH_PATH = "/services/coursehub/api/v1/lti/launch"
#: Port of the course app service on the hub machine.
SERVICE_PORT = 10101
#: Concurrent spawns per CPU of the machine that runs the servers (see plan_spawn_limit).
#: benchmarks/bench_spawn.py, 30 servers on 2 shared CPUs: 2 per CPU gave the last
#: server at 104-130 s with spawns of 17-37 s at most; 4 per CPU, 100 s with spawns
#: up to 33 s (124 s under heavier load).
SPAWNS_PER_CPU = 2
#: Seconds a server may take to answer once launched (JupyterHub's default is 30).
HTTP_TIMEOUT_S = 180
#: Retry-After range (s) with a 429; JupyterHub's documentation ("Spawner throttling") asks
#: for a lower bound near the median spawn. Spawns take 2-5 s here since servers start
#: without rfc3987-syntax (0.7-0.8 s of CPU each). benchmarks/bench_spawn.py, 30 servers on
#: 2 CPUs, interleaved: last ready 35.0 and 39.1 s with (4, 12), 57.2 and 53.2 s with
#: (10, 30); bench_exam_spawn.py, 60 exam servers: last 46.3 and 43.2 s (all 60 within the
#: first minute) against 64.6 and 68.8 s. JupyterHub's (30, 60) left slots idle (286 s to
#: the last of 30, when a spawn took 10-11 s).
SPAWN_RETRY_RANGE_S = (4, 12)
#: Seconds between two passes of jupyterhub-idle-culler and of the kernel culler
#: (z2jh's ``cull.every`` default; the culler's own default is half its timeout).
CULL_EVERY_S = 300
#: Seconds between two passes of the hub's usage ingester (``coursehub usage ingest
#: --every``, local spawners): the hub samples its servers every 60 s, so a Usage page
#: is at most about three minutes behind.
USAGE_INGEST_EVERY_S = 120
#: Seconds the spawner may take to launch a server, by spawner kind: a Slurm
#: queue wait or an image pull (z2jh's own default is 300) take longer.
#: Seconds between the hub's polls of a systemd or Slurm server (``Spawner.poll_interval``,
#: JupyterHub's default 30 s; 10 % jitter): a server that died is noticed, and the
#: student's reload gets the "Server not running" page, within 10 s. Local servers are
#: noticed at once (:mod:`coursehub.spawn.serverexit`), Slurm servers within about 2 s
#: by the hub's job watch (:mod:`coursehub.spawn.slurmwatch`; this poll is its fallback).
POLL_INTERVAL_S = 8
START_TIMEOUT_S = {"slurm": 300, "kubernetes": 300, "systemd": 120, "local": 120}
#: Spawner kinds of ``coursehub demo``: local processes, or Slurm jobs on this host's cluster.
DEMO_SPAWNER_KINDS = ("local", "slurm")


def plan_spawn_limit(n_cpus: float, per_cpu: int = SPAWNS_PER_CPU) -> int:
    """Return ``concurrent_spawn_limit`` for servers started on ``n_cpus`` CPUs.

    Rule: ``max(2, floor(per_cpu * n_cpus))``. Starting a single-user server
    (jupyter-server with JupyterLab) costs about 1-2 s of CPU, and part of a
    start is spent waiting (imports from disk, hub API round trips), so about
    two starts per CPU keep the CPUs busy; more only share the same CPUs
    between more starts, each then taking longer, up to ``http_timeout``
    (measured with ``benchmarks/bench_spawn.py``). Users beyond the limit get
    HTTP 429 and retry after ``Retry-After`` seconds.

    Parameters
    ----------
    n_cpus
        CPUs available to the servers (possibly fractional, e.g. a cgroup quota).
    per_cpu
        Concurrent spawns per CPU.

    Returns
    -------
    int
        The limit, at least 2.
    """
    return max(2, math.floor(per_cpu * n_cpus))


@dataclass(frozen=True)
class HubSettings:
    """What varies between deployments; every field has a production default.

    Attributes
    ----------
    kind
        Spawner kind, one of :data:`coursehub.contract.SPAWNER_KINDS`.
    data_dir
        The hub's state directory (its database, cookie secret, GPU state).
    bind_url, hub_bind_url, proxy_api_url
        Public URL (through the proxy), the hub's own URL, the proxy's API.
    public_url
        The hub's address as browsers reach it when TLS ends at a proxy in front
        of it (``JupyterHub.public_url``); "": not rendered, the hub reads it
        from each request.
    hub_connect_url
        How Slurm compute nodes reach the hub.
    proxy_command
        configurable-http-proxy command, or () when it is on the PATH.
    service_url, service_command
        Where the course app listens and how the hub starts it.
    database_url
        The catalog's SQLAlchemy URL (``COURSEHUB_DATABASE_URL`` wins at run time).
    cull_idle_s
        Seconds of inactivity before the idle culler stops a server; also
        Jupyter Server's ``MappingKernelManager.cull_idle_timeout`` (a kernel
        idle that long with no browser tab connected is shut down; a busy one
        never is). See :func:`server_args`.
    gpu_cull_idle_s
        Seconds of inactivity before a server holding a GPU stops itself
        (:mod:`coursehub.spawn.busyactivity`); 0: only the idle culler's timeout.
    concurrent_spawn_limit
        Spawns allowed to run at once (pending until the server answers); the
        hub answers HTTP 429 with ``Retry-After`` beyond it. 20 suits a hub
        whose servers run on a 10-core machine; :func:`plan_spawn_limit` gives
        the rule for another machine.
    start_timeout_s
        Seconds the spawner may take to launch a server (``Spawner.start_timeout``);
        None: :data:`START_TIMEOUT_S` of the spawner kind.
    http_timeout_s
        Seconds a launched server may take to answer HTTP (``Spawner.http_timeout``).
    spawn_retry_range_s
        ``(min, max)`` seconds of the ``Retry-After`` the hub suggests with a 429
        (``JupyterHub.spawn_throttle_retry_range``, default (30, 60), set through
        ``tornado_settings`` as JupyterHub 6.1 does not read it from config); JupyterHub's
        documentation asks for a lower bound near the median spawn time.
    default_profile
        Profile of a user in no course.
    no_course
        A user in no course: ``"default"`` (notice, then ``default_profile``)
        or ``"refuse"`` (notice, no server); see :class:`coursehub.spawn.spawner.CourseProfiles`.
    demo
        Render the demo configuration (shared password, servers as the hub's user).
    formgrader_courses
        Demo: the courses whose formgrader the hub runs as a service; the
        course app gets them in ``COURSEHUB_FORMGRADER_COURSES`` and links
        only to those.
    admin_users
        Hub admins (``Authenticator.admin_users``), admins of the course app too.
    allowed_users
        Accounts the hub creates at start besides those the course sync adds
        (``Authenticator.allowed_users``), e.g. portal managers in no course.
    service_display_name
        The course app's name in the hub's Services menu.
    lti_platforms
        LTI 1.3 platform registrations (:func:`coursehub.hub.ltiplatforms.parse_registrations`);
        non-empty: the hub also accepts LMS launches
        (:class:`coursehub.spawn.lti.CoursehubLTIAuthenticator`) beside its login form.
    extra
        Settings of one spawner kind: ``slurm_partition``, ``slurm_runtime``,
        ``usage_dir`` (slurm: the hub's usage folder on storage the compute
        nodes share; "": the hub's own ``/run/coursehub/usage-<hub id>``),
        ``shared_root``, and the Kubernetes images.
    """

    kind: str = "systemd"
    data_dir: str = "/srv/jupyterhub"
    bind_url: str = "http://:8000"
    public_url: str = ""
    hub_bind_url: str = "http://127.0.0.1:8081"
    proxy_api_url: str = "http://127.0.0.1:8001"
    hub_connect_url: str = "http://HUB-HOSTNAME:8081"
    proxy_command: tuple[str, ...] = ()
    service_url: str = f"http://127.0.0.1:{SERVICE_PORT}"
    service_command: tuple[str, ...] = ("coursehub", "web", "serve")
    database_url: str = "postgresql+psycopg://coursehub@localhost/coursehub"
    cull_idle_s: int = 3600
    gpu_cull_idle_s: int = 900
    concurrent_spawn_limit: int = 20
    start_timeout_s: int | None = None
    http_timeout_s: int = HTTP_TIMEOUT_S
    spawn_retry_range_s: tuple[int, int] = SPAWN_RETRY_RANGE_S
    default_profile: CourseProfile = DEFAULT_PROFILE
    no_course: str = "default"
    demo: bool = False
    formgrader_courses: tuple[str, ...] = ()
    admin_users: tuple[str, ...] = ()
    allowed_users: tuple[str, ...] = ()
    service_display_name: str = COURSE_APP_DISPLAY_NAME
    lti_platforms: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def _pyrepr(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return repr(value)


def _yamlstr(value: Any) -> str:
    return json.dumps(str(value))


def _start_timeout_s(settings: HubSettings) -> int:
    if settings.start_timeout_s is not None:
        return settings.start_timeout_s
    return START_TIMEOUT_S.get(settings.kind, max(START_TIMEOUT_S.values()))


def plan_hub_bind_url(hub_connect_url: str) -> str:
    """Return the hub's ``hub_bind_url`` for servers that call it at ``hub_connect_url``.

    Slurm jobs run on other machines: the hub listens on every interface
    (``http://:PORT``, JupyterHub's notation) at the port the nodes use.

    Raises
    ------
    UsageError
        If ``hub_connect_url`` is not an ``http(s)://host:port`` URL.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(hub_connect_url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise UsageError(
            f"--hub-connect-url must look like http://HOST:PORT, got {hub_connect_url!r}"
        )
    return f"{parts.scheme}://:{port}"


def busy_server_arg() -> str:
    """Return the single-user server argument enabling the busy-kernel extension."""
    return SERVER_ARG


#: The home's disk display warns when less than this fraction of it is left
#: (jupyter-resource-usage's ``disk_warning_threshold``), as ``coursehub doctor``
#: does from 90 % used.
DISK_WARNING_FRACTION = 0.1


def server_args(cull_idle_s: int) -> list[str]:
    """Return the single-user servers' arguments: the busy-kernel extension and kernel culling.

    Jupyter Server's kernel culler (``MappingKernelManager``, jupyter_server
    ``services/kernels/kernelmanager.py``): a kernel idle for ``cull_idle_s``
    is shut down (``cull_idle_timeout``), looked at every 300 s
    (``cull_interval``), never while busy (``cull_busy=False``) nor while a
    browser tab is connected (``cull_connected=False``). The servers
    themselves are stopped by jupyterhub-idle-culler, for which a busy kernel
    or a running runner job is activity (:data:`coursehub.contract.SERVER_ARG`).
    jupyter-resource-usage also shows the CPU use against the course's CPUs
    (``ResourceUseDisplay.track_cpu_percent``) and the disk of the home
    (``track_disk_usage``; ``disk_path`` defaults to the server's ``$HOME``,
    jupyter_resource_usage ``config.py``), flashing from
    :data:`DISK_WARNING_FRACTION` left: its figures are ``statvfs`` of the
    home (``psutil.disk_usage``), the quota only where the file system's
    ``statfs`` reports it (docs/homes.md).
    """
    return [
        busy_server_arg(),
        f"--MappingKernelManager.cull_idle_timeout={cull_idle_s}",
        f"--MappingKernelManager.cull_interval={CULL_EVERY_S}",
        "--MappingKernelManager.cull_busy=False",
        "--MappingKernelManager.cull_connected=False",
        # jupyter-resource-usage shows memory and CPU against MEM_LIMIT and CPU_LIMIT,
        # which JupyterHub's Spawner.get_env sets from the course profile's limits.
        "--ResourceUseDisplay.track_cpu_percent=True",
        "--ResourceUseDisplay.track_disk_usage=True",
        f"--ResourceUseDisplay.disk_warning_threshold={DISK_WARNING_FRACTION}",
    ]


def render_idle_notice(cull_idle_s: int, max_busy_s: float | None = None) -> str:
    """Return what students are told about the idle culler (hub home and spawn pages).

    Parameters
    ----------
    cull_idle_s
        The culler's timeout in seconds.
    max_busy_s
        How long a busy kernel counts as activity
        (:class:`coursehub.spawn.busyactivity.BusyKernelActivity`; default its
        ``MAX_BUSY_S``).
    """
    max_busy_s = MAX_BUSY_S if max_busy_s is None else max_busy_s
    return (
        f"Your server is stopped after {_duration(cull_idle_s)} without activity: save your "
        f"work. A computation still running counts as activity (up to {_duration(max_busy_s)})."
    )


def _duration(seconds: float) -> str:
    if seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return f"{hours} hour{'s' if hours != 1 else ''}"
    minutes = max(1, round(seconds / 60))
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def render_hub_config(settings: HubSettings) -> str:
    """Return the configuration text for ``settings``: Python, or YAML for ``kubernetes``.

    Raises
    ------
    UsageError
        If the spawner kind is unknown, or ``demo`` is asked with another
        spawner than ``local`` or ``slurm``.
    """
    import jinja2

    if settings.kind not in SPAWNER_KINDS:
        raise UsageError(
            f"unknown spawner {settings.kind!r}: choose one of {', '.join(SPAWNER_KINDS)}"
        )
    if settings.demo and settings.kind not in DEMO_SPAWNER_KINDS:
        raise UsageError(
            "the demo configuration uses the local spawner only, or slurm (servers as "
            f"Slurm jobs); got {settings.kind!r}"
        )
    if settings.lti_platforms and settings.kind == "kubernetes":
        raise UsageError(
            "--lti renders for the systemd, local and slurm spawners; on Kubernetes add the "
            "authenticator to hub.extraConfig by hand (docs/lti.md)"
        )
    if settings.no_course not in NO_COURSE_CHOICES:
        raise UsageError(
            f"no_course must be one of {', '.join(NO_COURSE_CHOICES)}, got {settings.no_course!r}"
        )
    name = "z2jh-values.yaml.j2" if settings.kind == "kubernetes" else "jupyterhub_config.py.j2"
    source = resources.files("coursehub.hub").joinpath("templates", name).read_text("utf-8")
    env = jinja2.Environment(
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False
    )
    env.filters.update(pyrepr=_pyrepr, yamlstr=_yamlstr)
    context = {
        **{f: getattr(settings, f) for f in settings.__dataclass_fields__},
        "default_mem": format_mem(settings.default_profile.mem_limit),
        "start_timeout_s": _start_timeout_s(settings),
        "poll_interval_s": POLL_INTERVAL_S,
        "idle_notice": render_idle_notice(settings.cull_idle_s),
        "busy_arg": busy_server_arg(),
        "server_args": server_args(settings.cull_idle_s),
        "cull_every_s": CULL_EVERY_S,
        "usage_ingest_every_s": USAGE_INGEST_EVERY_S,
        "lti_launch_url": settings.service_url.rstrip("/") + LTI_LAUNCH_PATH,
        "lti_password_class": (
            "coursehub.spawn.demoauth.DemoPasswordAuthenticator" if settings.demo else "pam"
        ),
        "slurm_partition": settings.extra.get("slurm_partition", ""),
        "slurm_runtime": settings.extra.get("slurm_runtime", "8:00:00"),
        "usage_dir": settings.extra.get("usage_dir", "") if settings.kind == "slurm" else "",
        "hub_image": settings.extra.get("hub_image", "quay.io/jupyterhub/k8s-hub"),
        "hub_image_tag": settings.extra.get("hub_image_tag", "4.2.0"),
        "singleuser_image": settings.extra.get(
            "singleuser_image", "quay.io/jupyter/pytorch-notebook"
        ),
        "singleuser_image_tag": settings.extra.get("singleuser_image_tag", "latest"),
    }
    return env.from_string(source).render(context)


def render_service_names(names: Mapping[str, str]) -> str:
    """Return ``jupyterhub_config.py`` lines naming services in the hub's Services menu (pure).

    ``names`` maps a service name (e.g. a formgrader's course_id) to what
    people read (e.g. "Grading: Machine Learning for Mechanics"); the lines
    set ``info["display_name"]`` of those services configured above them,
    which coursehub's ``page.html`` shows (:mod:`coursehub.spawn.hubpages`).
    """
    if not names:
        return ""
    return (
        "# --- Names shown in the hub's Services menu (coursehub.spawn.hubpages) ---\n"
        f"SERVICE_DISPLAY_NAMES = {dict(names)!r}\n"
        "for _service in c.JupyterHub.services:\n"
        "    if _service['name'] in SERVICE_DISPLAY_NAMES:\n"
        "        _service.setdefault('info', {})['display_name'] = "
        "SERVICE_DISPLAY_NAMES[_service['name']]\n"
    )
