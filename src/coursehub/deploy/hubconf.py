"""The hub configuration of a deployment: ``coursehub hub config --spawner systemd``, then its tail.

The body is :func:`coursehub.hub.render.render_hub_config` for the systemd
spawner; the tail (a later assignment wins in a traitlets config file,
JupyterHub's "Configuration basics") moves the cookie secret to
``/etc/coursehub``, serves HTTPS (``JupyterHub.ssl_cert``/``ssl_key``) and
turns the course app into an external service: it runs in its own unit
(``coursehub-web.service``) and the hub knows it by its token (JupyterHub's
"Services" documentation, "Externally-Managed Services").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from coursehub.deploy.layout import DeployLayout
from coursehub.deploy.units import WEB_PORT
from coursehub.hub.render import HubSettings, render_hub_config

#: Where the hub's own API listens (``JupyterHub.hub_bind_url``; HubSettings' default).
HUB_API_URL = "http://127.0.0.1:8081/hub/api"


@dataclass(frozen=True)
class TlsFiles:
    """The certificate and key the hub serves (host paths); ``trial``: self-signed."""

    cert: str
    key: str
    trial: bool


def _tail(layout: DeployLayout, tls: TlsFiles) -> str:
    trial = (
        "# TRIAL ONLY: a self-signed pair made by `coursehub deploy` (browsers warn).\n"
        "# Give the department's certificate: coursehub deploy --tls-cert FILE --tls-key FILE\n"
        if tls.trial
        else "# The certificate and key given to `coursehub deploy --tls-cert/--tls-key`.\n"
    )
    return (
        "\n# --- coursehub deploy --------------------------------------------------------\n"
        "# Secrets live in /etc/coursehub (0600), written once by `coursehub deploy`.\n"
        f"c.JupyterHub.cookie_secret_file = {str(layout.cookie_secret)!r}\n"
        f"{trial}"
        f"c.JupyterHub.ssl_cert = {tls.cert!r}\n"
        f"c.JupyterHub.ssl_key = {tls.key!r}\n"
        "# The course app runs in its own unit (coursehub-web.service, gunicorn): the hub\n"
        "# does not start it and knows it by its token (secrets.env).\n"
        "for _service in c.JupyterHub.services:\n"
        '    if _service["name"] == "coursehub":\n'
        '        _service.pop("command", None)\n'
        '        _service["api_token"] = os.environ["COURSEHUB_SERVICE_TOKEN"]\n'
    )


def render_deploy_hub_config(
    layout: DeployLayout, database_url: str, proxy: str, tls: TlsFiles, port: int = 443
) -> str:
    """Return the deployment's ``jupyterhub_config.py`` (pure).

    Parameters
    ----------
    database_url
        The catalog's URL without a password (``COURSEHUB_DATABASE_URL`` in
        the hub's environment wins at run time).
    proxy
        The ``configurable-http-proxy`` executable.
    port
        The HTTPS port the proxy listens on.
    """
    settings = replace(
        HubSettings(),
        kind="systemd",
        data_dir=str(layout.hub_dir),
        bind_url=f"https://:{port}",
        database_url=database_url,
        proxy_command=(proxy,),
        service_url=f"http://127.0.0.1:{WEB_PORT}",
    )
    return render_hub_config(settings) + _tail(layout, tls)


def render_web_env(service_token: str) -> dict[str, str]:
    """Return the course app's hub variables (JupyterHub's service environment, pure).

    The variables a hub-managed service gets from the hub (JupyterHub
    "Services", "Launching a Hub-Managed Service"), given here to an
    external one: its name, token, the hub API and its own prefix and URL.
    """
    return {
        "JUPYTERHUB_SERVICE_NAME": "coursehub",
        "JUPYTERHUB_API_TOKEN": service_token,
        "JUPYTERHUB_API_URL": HUB_API_URL,
        "JUPYTERHUB_BASE_URL": "/",
        "JUPYTERHUB_SERVICE_PREFIX": "/services/coursehub/",
        "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{WEB_PORT}",
        "JUPYTERHUB_CLIENT_ID": "service-coursehub",
        "JUPYTERHUB_OAUTH_CALLBACK_URL": "/services/coursehub/oauth_callback",
    }
