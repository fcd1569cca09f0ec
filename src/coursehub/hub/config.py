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
        "--usage-dir",
        metavar="DIR",
        default="",
        help="slurm: the hub's usage folder, on storage that the hub and every compute node "
        "mount at the same path; the runner jobs of a server write to DIR-jobs (needed "
        "unless --hub-connect-url names this host)",
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


#: Host names of a --hub-connect-url whose compute node is the hub's own host.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def plan_slurm_usage_dir(connect_url: str, usage_dir: str) -> str:
    """Return the Slurm hub's usage folder to render ("": the hub's own, node-local one).

    A ``coursehub run`` job started in a Slurm server writes its usage from
    the compute node (:mod:`coursehub.spawn.jobusage`). The hub's own folder
    (``/run/coursehub/usage-<hub id>``) reaches only a node that is the
    hub's host (``connect_url`` on a loopback address); elsewhere the
    folder must be one that the hub and the nodes mount at the same path.

    Raises
    ------
    UsageError
        If ``usage_dir`` is not absolute, or is empty while the nodes are
        other machines (each job's usage would be lost).
    """
    if usage_dir:
        if not usage_dir.startswith("/"):
            raise UsageError(f"--usage-dir must be an absolute path, got {usage_dir!r}")
        return usage_dir.rstrip("/") or "/"
    host = urlsplit(connect_url).hostname or ""
    if host in LOOPBACK_HOSTS:
        return ""
    raise UsageError(
        "--spawner slurm needs --usage-dir DIR: the runner jobs (coursehub run) of a server "
        "write their usage on the compute node, which does not reach the hub's "
        "/run/coursehub; give a folder that the hub and every node mount at the same path "
        "(as the homes), or a --hub-connect-url on 127.0.0.1 when the hub's host is the node"
    )


def run(args: argparse.Namespace) -> int:
    """Print (or write) the configuration asked for on the command line; return 0.

    With ``--lti``, a public address that is plain HTTP (``--public-url``, else
    ``--bind-url``) is reported on stderr as one warning line
    (:func:`coursehub.hub.ltiplatforms.plan_https_warning`): LMS launches
    cannot sign in there; the configuration is still rendered. A Slurm hub
    whose nodes would not reach its usage folder is refused
    (:func:`plan_slurm_usage_dir`).

    Raises
    ------
    UsageError
        If ``--cull-idle`` or ``--spawn-limit`` is not positive, ``--cull-gpu-idle``
        negative, the ``--lti`` file, ``--public-url``, ``--hub-connect-url`` or
        ``--usage-dir`` refused, or the settings not rendered
        (:func:`coursehub.hub.render.render_hub_config`).
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
    if args.spawner == "slurm":
        usage_dir = plan_slurm_usage_dir(connect_url, str(getattr(args, "usage_dir", "") or ""))
        settings = replace(settings, extra={**settings.extra, "usage_dir": usage_dir})
    text = render_hub_config(settings)
    warning = plan_https_warning(settings.bind_url, public_url) if platforms else ""
    if warning:
        print(f"coursehub: warning: --lti: {warning}", file=sys.stderr)
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
