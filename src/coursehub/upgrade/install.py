"""What an install made by ``coursehub deploy`` is, read back from its files (below ``--root``).

An upgrade re-renders the configuration with the choices the install was made
with: the catalog (SQLite, or PostgreSQL when ``secrets.env`` holds
``COURSEHUB_DB_PASSWORD``), the TLS pair (given, or a trial pair), the HTTPS
port and the proxy (from ``jupyterhub_config.py``). Its environment is the one
the units read (``EnvironmentFile=``, systemd.exec(5)): ``coursehub.env`` then
``secrets.env``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from coursehub.deploy.files import read_env_file
from coursehub.deploy.layout import DeployLayout
from coursehub.errors import UsageError

#: The line of the rendered hub configuration that keeps servers over a hub restart.
KEEP_SERVERS = "c.JupyterHub.cleanup_servers = False"
#: The spawner whose servers are units of their own, outside the hub's control group.
SYSTEMD_SPAWNER = "coursehub.spawn.systemdserver.CoursehubSystemdSpawner"


@dataclass(frozen=True)
class Install:
    """An install's choices and environment.

    Attributes
    ----------
    database : str
        ``"sqlite"`` or ``"postgresql"``.
    tls_cert, tls_key : pathlib.Path or None
        The given pair on disk (below the root); None for a trial pair.
    port : int
        The HTTPS port of ``c.JupyterHub.bind_url``.
    proxy : str
        The ``configurable-http-proxy`` of ``c.ConfigurableHTTPProxy.command``.
    environ : dict of str to str
        The units' environment, paths mapped below the root (:func:`env_on_disk`).
    hub_config : str
        The text of the installed ``jupyterhub_config.py``.
    """

    database: str
    tls_cert: Path | None
    tls_key: Path | None
    port: int
    proxy: str
    environ: dict[str, str]
    hub_config: str


def env_on_disk(layout: DeployLayout, environ: dict[str, str]) -> dict[str, str]:
    """Return ``environ`` with absolute paths and SQLite URLs mapped below ``layout.root`` (pure).

    ``/var/lib/coursehub`` below root ``/tmp/r`` is ``/tmp/r/var/lib/coursehub``;
    ``sqlite:////var/lib/coursehub/catalog.sqlite`` becomes
    ``sqlite:////tmp/r/var/lib/coursehub/catalog.sqlite``. Other values are kept.
    """
    mapped = {}
    for key, value in environ.items():
        if value.startswith("sqlite:////"):
            value = "sqlite:///" + str(layout.on_disk(PurePosixPath(value[len("sqlite:///") :])))
        elif value.startswith("/"):
            value = str(layout.on_disk(PurePosixPath(value)))
        mapped[key] = value
    return mapped


def _assigned(config: str, name: str, where: Path) -> object:
    """Return the literal value of the last ``name = ...`` line of ``config``."""
    lines = re.findall(rf"^{re.escape(name)} = (.+)$", config, flags=re.MULTILINE)
    if not lines:
        raise UsageError(f"{where}: no `{name} = ...` line; run `coursehub deploy` again")
    try:
        return ast.literal_eval(lines[-1])
    except (ValueError, SyntaxError) as exc:
        raise UsageError(f"{where}: `{name} = {lines[-1]}` is not a literal") from exc


def parse_port(bind_url: object, where: Path) -> int:
    """Return the port of a ``https://:PORT`` bind URL (pure); UsageError naming ``where``."""
    match = re.fullmatch(r"https?://[^:/]*:(\d+)/?", str(bind_url))
    if match is None:
        raise UsageError(f"{where}: c.JupyterHub.bind_url {bind_url!r} names no port")
    return int(match.group(1))


def read_install(layout: DeployLayout) -> Install:
    """Return the install below ``layout.root``.

    Raises
    ------
    UsageError
        If there is no install there (no ``coursehub.env`` or hub configuration:
        run ``coursehub deploy`` first), or its hub configuration lacks the
        bind URL or the proxy command.
    """
    settings, config_path = layout.on_disk(layout.settings_env), layout.on_disk(layout.hub_config)
    for path in (settings, config_path):
        if not path.is_file():
            raise UsageError(f"no install below {layout.root}: {path} is missing; "
                             "run `coursehub deploy` first")  # fmt: skip
    secrets = read_env_file(layout.on_disk(layout.secrets_env))
    environ = env_on_disk(layout, {**read_env_file(settings), **secrets})
    config = config_path.read_text(encoding="utf-8")
    command = _assigned(config, "c.ConfigurableHTTPProxy.command", config_path)
    proxy = command[0] if isinstance(command, list | tuple) and command else ""
    cert, key = (layout.on_disk(layout.tls_dir / name) for name in ("cert.pem", "key.pem"))
    given = cert.is_file() and key.is_file()
    return Install(
        database="postgresql" if "COURSEHUB_DB_PASSWORD" in secrets else "sqlite",
        tls_cert=cert if given else None,
        tls_key=key if given else None,
        port=parse_port(_assigned(config, "c.JupyterHub.bind_url", config_path), config_path),
        proxy=str(proxy),
        environ=environ,
        hub_config=config,
    )


def servers_kept(hub_config: str) -> list[str]:
    """Return why a hub restart under this configuration would stop servers ([] if none, pure).

    Servers survive a restart of ``coursehub-hub.service`` when the hub does not
    stop them at shutdown (``JupyterHub.cleanup_servers = False``, JupyterHub's
    configuration reference) and when they are not in the hub's control group,
    which systemd kills on restart (``KillMode=control-group``,
    systemd.kill(5)): SystemdSpawner runs each server as a transient unit of its
    own (jupyterhub-systemdspawner README). A local-process spawner's servers
    are the hub's children and stop with it (jupyterhub/jupyterhub#5107).
    """
    reasons = []
    if KEEP_SERVERS not in hub_config:
        reasons.append(f"the hub configuration lacks `{KEEP_SERVERS}`")
    if SYSTEMD_SPAWNER not in hub_config:
        reasons.append("its spawner is not the systemd spawner (servers in the hub's unit)")
    return reasons
