"""``coursehub hub config``: its options, and the configuration printed or written.

The configuration itself is rendered by
:func:`coursehub.hub.render.render_hub_config`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from urllib.parse import urlsplit

from coursehub.atomicfile import write_atomically
from coursehub.contract import NO_COURSE_CHOICES, SPAWNER_KINDS
from coursehub.errors import UsageError
from coursehub.hub.ltiplatforms import plan_https_warning, read_registrations
from coursehub.hub.render import HubSettings, plan_hub_bind_url, render_hub_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``coursehub hub config`` (in the order ``--help`` lists them)."""
    _add_deployment_arguments(parser)
    _add_server_arguments(parser)
    _add_connection_arguments(parser)


def _add_deployment_arguments(parser: argparse.ArgumentParser) -> None:
    """``--spawner``, ``--data-dir``, ``--bind-url``, ``--public-url``, ``--database-url``."""
    parser.add_argument(
        "--spawner",
        choices=SPAWNER_KINDS,
        default="systemd",
        help="spawner kind (kubernetes: Zero to JupyterHub Helm values)",
    )
    parser.add_argument(
        "--data-dir",
        default=HubSettings.data_dir,
        help="hub state directory (default: %(default)s)",
    )
    parser.add_argument(
        "--bind-url",
        default=HubSettings.bind_url,
        help="public URL the proxy listens on (default: %(default)s)",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        default="",
        help="the hub's address as browsers reach it, e.g. https://hub.example.org/, when "
        "TLS ends at a proxy in front of the hub (c.JupyterHub.public_url)",
    )
    parser.add_argument(
        "--database-url",
        default=HubSettings.database_url,
        help="catalog database URL (default: %(default)s)",
    )


def _add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """``--cull-idle``, ``--cull-gpu-idle``, ``--no-course``, ``--spawn-limit``."""
    parser.add_argument(
        "--cull-idle",
        type=int,
        default=HubSettings.cull_idle_s,
        metavar="S",
        help="stop servers idle for S seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--cull-gpu-idle",
        type=int,
        default=HubSettings.gpu_cull_idle_s,
        metavar="S",
        help="stop servers holding a GPU after S seconds without activity; 0: as others "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--no-course",
        choices=NO_COURSE_CHOICES,
        default=HubSettings.no_course,
        help="a user in no course: start the default profile or refuse, with a notice "
        "on the spawn page either way (default: %(default)s)",
    )
    parser.add_argument(
        "--spawn-limit",
        type=int,
        default=HubSettings.concurrent_spawn_limit,
        metavar="N",
        help="concurrent spawns (default: %(default)s; rule: 2 per CPU core of the machine "
        "that runs the servers, at least 2)",
    )


def _add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--hub-connect-url`` (Slurm nodes), ``--lti`` (LMS platforms), ``-o/--output``."""
    parser.add_argument(
        "--hub-connect-url",
        metavar="URL",
        default=HubSettings.hub_connect_url,
        help="slurm: how the compute nodes reach the hub, e.g. http://hub.example.org:8081; "
        "the hub then listens on that port on every interface (default: %(default)s)",
    )
    parser.add_argument(
        "--lti",
        metavar="FILE",
        help="also accept LTI 1.3 launches from the LMS platforms registered in FILE "
        "(TOML, one [[platform]] per registration; see docs/lti.md)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE (atomically) instead of printing"
    )


#: What each spawner kind leaves unmetered by coursehub's usage meter (docs/usage.md).
UNMETERED = {
    "slurm": (
        "runner jobs (coursehub run) started in a server are not metered: the compute "
        "nodes do not reach the hub's usage folder (Slurm's own accounting has the servers)"
    ),
}


def plan_metering_warning(kind: str) -> str:
    """Return the warning line on what the servers of spawner ``kind`` leave unmetered, or "".

    The local (cgroup) spawners meter servers and their runner jobs; the
    systemd spawner gives each unit the jobs' usage folder
    (:mod:`coursehub.spawn.systemdserver`); a Slurm job runs on a compute
    node that does not reach the hub's usage folder.
    """
    return UNMETERED.get(kind, "")


def run(args: argparse.Namespace) -> int:
    """Print (or write) the configuration asked for on the command line; return 0.

    With ``--lti``, a public address that is plain HTTP (``--public-url``, else
    ``--bind-url``) is reported on stderr as one warning line
    (:func:`coursehub.hub.ltiplatforms.plan_https_warning`): LMS launches
    cannot sign in there. A spawner kind whose runner jobs are not metered
    (:func:`plan_metering_warning`) gets one warning line too. The
    configuration is still rendered.

    Raises
    ------
    UsageError
        If ``--cull-idle`` or ``--spawn-limit`` is not positive, ``--cull-gpu-idle``
        negative, the ``--lti`` file, ``--public-url`` or ``--hub-connect-url`` refused, or the
        settings not rendered (:func:`coursehub.hub.render.render_hub_config`).
    """
    if args.cull_idle < 1 or args.spawn_limit < 1:
        raise UsageError("--cull-idle and --spawn-limit must be positive")
    if args.cull_gpu_idle < 0:
        raise UsageError("--cull-gpu-idle must be 0 (off) or a number of seconds")
    public_url = _public_url(args)
    lti = getattr(args, "lti", None)
    platforms = tuple(read_registrations(lti)) if lti else ()
    connect_url = getattr(args, "hub_connect_url", HubSettings.hub_connect_url)
    settings = replace(
        HubSettings(),
        kind=args.spawner,
        data_dir=args.data_dir,
        bind_url=args.bind_url,
        public_url=public_url,
        database_url=args.database_url,
        cull_idle_s=args.cull_idle,
        gpu_cull_idle_s=args.cull_gpu_idle,
        concurrent_spawn_limit=args.spawn_limit,
        no_course=args.no_course,
        lti_platforms=platforms,
    )
    if args.spawner == "slurm" and connect_url != HubSettings.hub_connect_url:
        settings = replace(
            settings, hub_connect_url=connect_url, hub_bind_url=plan_hub_bind_url(connect_url)
        )
    text = render_hub_config(settings)
    warning = plan_https_warning(settings.bind_url, public_url) if platforms else ""
    if warning:
        print(f"coursehub: warning: --lti: {warning}", file=sys.stderr)
    warning = plan_metering_warning(settings.kind)
    if warning:
        print(f"coursehub: warning: --spawner {settings.kind}: {warning}", file=sys.stderr)
    if args.output:
        write_atomically(
            args.output, text, mode=0o600
        )  # owner-only, as the hub writes its own state
    else:
        print(text, end="")
    return 0


def _public_url(args: argparse.Namespace) -> str:
    """Return ``--public-url`` checked: "" or an http(s) URL with a host, not on Kubernetes."""
    url = str(getattr(args, "public_url", "") or "")
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--public-url must look like https://HOST/, got {url!r}")
    if args.spawner == "kubernetes":
        raise UsageError("--public-url renders for the systemd, local and slurm spawners")
    return url
