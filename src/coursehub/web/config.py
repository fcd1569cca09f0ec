"""Layered configuration of the course web app, decided by pure functions.

Layers, later ones win: :data:`DEFAULTS`, then ``COURSEHUB_*`` environment
variables (``app.config.from_prefixed_env("COURSEHUB")``), then the
``JUPYTERHUB_*`` variables a hub gives to its services (:func:`read_hub_env`),
then the test overrides passed to ``create_app``. Nothing here reads the
environment at import time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coursehub.errors import UsageError

#: Built-in defaults; every key can be overridden by ``COURSEHUB_<KEY>``.
DEFAULTS: dict[str, Any] = {
    "SECRET_KEY": None,
    "DATABASE_URL": None,
    "CHECK_SCHEMA": True,
    # standalone development mode: only when DEV_USER names the user
    "DEV_USER": None,
    "DEV_ADMIN": False,
    "DEV_GROUPS": [],
    # hub groups whose members may create courses in any portal (they become the lead);
    # none by default: admins and a portal's managers create courses (docs/administration.md)
    "COURSE_CREATOR_GROUPS": [],
    # seconds a hub identity cached in the session is trusted before re-checking
    "IDENTITY_MAX_AGE_S": 300,
    # the student's page: the weekly budget's time zone (IANA; None: UTC) and where homes are
    # (HOMES_DIR, None: each account's home), docs/budgets.md
    "BUDGET_TIMEZONE": None,
    "HOMES_DIR": None,
    # tests only: a header naming the user, read only when app.testing is set
    "TEST_USER_HEADER": "X-Coursehub-Test-User",
    "API_TOKEN_RESOLVER": None,
    "SESSION_COOKIE_NAME": "coursehub-session",
    "SESSION_COOKIE_SAMESITE": "Lax",
    "SESSION_COOKIE_HTTPONLY": True,
    # roster uploads re-posted for confirmation: a few thousand rows fit easily
    "MAX_CONTENT_LENGTH": 4 * 1024 * 1024,
    "MAX_FORM_MEMORY_SIZE": 4 * 1024 * 1024,
    "WTF_CSRF_TIME_LIMIT": None,
    # proxies in front of the app whose X-Forwarded-For is trusted for the client's address
    # (an exam's allowed networks); None: 1 behind a hub (configurable-http-proxy), else 0
    "PROXY_HOPS": None,
}

# JUPYTERHUB_* service variable -> config key
HUB_VARIABLES: dict[str, str] = {
    "JUPYTERHUB_API_TOKEN": "HUB_API_TOKEN",
    "JUPYTERHUB_API_URL": "HUB_API_URL",
    "JUPYTERHUB_CLIENT_ID": "HUB_CLIENT_ID",
    "JUPYTERHUB_SERVICE_NAME": "HUB_SERVICE_NAME",
    "JUPYTERHUB_SERVICE_PREFIX": "HUB_SERVICE_PREFIX",
    "JUPYTERHUB_SERVICE_URL": "HUB_SERVICE_URL",
    "JUPYTERHUB_BASE_URL": "HUB_BASE_URL",
    "JUPYTERHUB_HOST": "HUB_HOST",
    "JUPYTERHUB_OAUTH_CALLBACK_URL": "HUB_OAUTH_CALLBACK_URL",
    "JUPYTERHUB_OAUTH_ACCESS_SCOPES": "HUB_OAUTH_ACCESS_SCOPES",
}


def read_hub_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the config entries carried by a hub's ``JUPYTERHUB_*`` variables.

    Parameters
    ----------
    environ : mapping
        The process environment (``os.environ``) or a test stand-in.

    Returns
    -------
    dict
        ``HUB_*`` keys for the variables that are set and non-empty.
    """
    return {key: environ[name] for name, key in HUB_VARIABLES.items() if environ.get(name)}


def plan_proxy_hops(config: Mapping[str, Any], mode: str) -> int:
    """Return how many proxies' ``X-Forwarded-For`` entries to trust for the client's address.

    ``PROXY_HOPS`` when set (0 to 5); else 1 behind a hub (``mode == "hub"``:
    requests come through configurable-http-proxy, which appends the
    client's address, its ``xfwd`` option), else 0.

    Raises
    ------
    UsageError
        ``PROXY_HOPS`` not a whole number from 0 to 5.
    """
    value = config.get("PROXY_HOPS")
    if value is None or value == "":
        return 1 if mode == "hub" else 0
    try:
        hops = int(value)
    except (TypeError, ValueError):
        hops = -1
    if not 0 <= hops <= 5:
        raise UsageError(f"COURSEHUB_PROXY_HOPS must be a whole number from 0 to 5, got {value!r}")
    return hops


def plan_auth_mode(config: Mapping[str, Any], testing: bool) -> str:
    """Decide how users are identified: ``"hub"``, ``"dev"`` or ``"test"``.

    Parameters
    ----------
    config : mapping
        The merged configuration.
    testing : bool
        ``app.testing``; only then may identities come from a test header.

    Returns
    -------
    str
        ``"hub"`` when the hub's service token is present, ``"dev"`` when
        ``DEV_USER`` names a user, ``"test"`` for a test app with neither.

    Raises
    ------
    UsageError
        Without hub variables and without ``DEV_USER`` outside tests, when
        both are given, or when the hub variables are incomplete.
    """
    hub = bool(config.get("HUB_API_TOKEN"))
    dev = bool(config.get("DEV_USER"))
    if hub and dev:
        raise UsageError(
            "COURSEHUB_DEV_USER is set while running as a JupyterHub service; "
            "unset it (development mode is for standalone runs only)"
        )
    if hub:
        if not config.get("HUB_CLIENT_ID"):
            raise UsageError("JUPYTERHUB_API_TOKEN is set but JUPYTERHUB_CLIENT_ID is missing")
        return "hub"
    if dev:
        return "dev"
    if testing:
        return "test"
    raise UsageError(
        "no way to identify users: run the app as a JupyterHub service "
        "(JUPYTERHUB_API_TOKEN and JUPYTERHUB_CLIENT_ID set by the hub), or name a "
        "development user explicitly (COURSEHUB_DEV_USER=NAME or "
        "`coursehub web serve --dev-user NAME`)"
    )


def plan_prefix(config: Mapping[str, Any]) -> str:
    """Return the URL prefix the app is served under, ``"/"`` or ``"/services/x/"``.

    The hub proxies ``/services/NAME/...`` to the service without stripping
    the prefix (``JUPYTERHUB_SERVICE_PREFIX``).
    """
    prefix = str(config.get("HUB_SERVICE_PREFIX") or "/")
    return "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"


def parse_groups(value: Any) -> tuple[str, ...]:
    """Return group names from a list or a comma-separated string (env values)."""
    if not value:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    return tuple(str(v).strip() for v in value if str(v).strip())
