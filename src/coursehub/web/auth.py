"""Sign-in: JupyterHub OAuth, the explicit development user, and the test header.

Hub mode follows JupyterHub's ``examples/service-whoami-flask``: an
anonymous visitor is sent to ``HubOAuth.login_url`` with a random ``state``
(kept, with the PKCE verifier and the page to return to, in the signed
session cookie); the hub calls back ``{prefix}oauth_callback``, where the
code is exchanged with ``token_for_code`` and the user is read with
``user_for_token``. The identity is cached in the session and re-checked
with the hub every ``IDENTITY_MAX_AGE_S`` seconds.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from typing import Any
from urllib.parse import urlencode

from flask import (
    Blueprint,
    Flask,
    abort,
    current_app,
    g,
    redirect,
    request,
    session,
    url_for,
)
from werkzeug.wrappers import Response

from coursehub.web.config import parse_groups, plan_prefix
from coursehub.web.identity import Identity, identity_from_hub
from coursehub.web.redirects import safe_next as plan_safe_next

bp = Blueprint("auth", __name__)

MODE_KEY = "coursehub.auth_mode"
HUB_AUTH_KEY = "coursehub.hub_auth"
#: One call at a time into HubAuth's blocking methods: they run on one event loop of
#: their own, which refuses a second caller ("This event loop is already running").
_HUB_CALLS = threading.Lock()


def init_app(app: Flask, mode: str) -> None:
    """Set up sign-in for ``mode`` (``"hub"``, ``"dev"`` or ``"test"``); the app registers
    :data:`bp` (:data:`coursehub.web.app.BLUEPRINTS`)."""
    app.extensions[MODE_KEY] = mode
    if mode == "hub":
        app.extensions[HUB_AUTH_KEY] = make_hub_auth(app.config)
    app.before_request(load_identity)
    app.context_processor(lambda: {"identity": g.get("identity")})


def make_hub_auth(config: Any) -> Any:
    """Return a :class:`jupyterhub.services.auth.HubOAuth` built from the ``HUB_*`` config."""
    from jupyterhub.services.auth import HubOAuth

    prefix = plan_prefix(config)
    base_url = config.get("HUB_BASE_URL") or "/"
    kwargs: dict[str, Any] = {
        "api_token": config["HUB_API_TOKEN"],
        "oauth_client_id": config["HUB_CLIENT_ID"],
        "base_url": prefix,
        "hub_prefix": base_url.rstrip("/") + "/hub/",
        "hub_host": config.get("HUB_HOST") or "",
        "oauth_redirect_uri": config.get("HUB_OAUTH_CALLBACK_URL") or prefix + "oauth_callback",
        "access_scopes": set(plan_access_scopes(config)),
        "cache_max_age": 60,
    }
    if config.get("HUB_API_URL"):
        kwargs["api_url"] = config["HUB_API_URL"]
    return HubOAuth(**kwargs)


def plan_access_scopes(config: Any) -> list[str]:
    """Return the hub scopes a user needs to use this service (empty: any hub user)."""
    if config.get("HUB_OAUTH_ACCESS_SCOPES"):
        return sorted(json.loads(config["HUB_OAUTH_ACCESS_SCOPES"]))
    name = config.get("HUB_SERVICE_NAME")
    return [f"access:services!service={name}"] if name else []


def hub_auth() -> Any:
    """Return the app's HubOAuth, or None outside hub mode."""
    return current_app.extensions.get(HUB_AUTH_KEY)


def auth_mode() -> str:
    """Return ``"hub"``, ``"dev"`` or ``"test"``."""
    return str(current_app.extensions[MODE_KEY])


def load_identity() -> None:
    """Before each request: find who is asking (API requests: see :mod:`coursehub.web.api.base`)."""
    mode = auth_mode()
    if mode == "dev":
        g.identity = dev_identity(current_app.config)
    elif mode == "test":
        g.identity = test_identity(request.headers.get(current_app.config["TEST_USER_HEADER"]))
    else:
        g.identity = session_identity()


def dev_identity(config: Any) -> Identity:
    """Return the development user named by ``DEV_USER`` (``DEV_ADMIN``, ``DEV_GROUPS``)."""
    return Identity(
        str(config["DEV_USER"]).lower(),
        bool(config.get("DEV_ADMIN")),
        parse_groups(config.get("DEV_GROUPS")),
    )


def test_identity(header: str | None) -> Identity | None:
    """Return the identity a test put in its header (JSON ``{"name", "admin", "groups"}``)."""
    if not current_app.testing or not header:
        return None
    return Identity.from_session(json.loads(header))


def session_identity() -> Identity | None:
    """Return the hub identity cached in the session, re-checked when it is old."""
    data = session.get("identity")
    if not data:
        return None
    if time.time() - session.get("checked_at", 0) > current_app.config["IDENTITY_MAX_AGE_S"]:
        identity = resolve_hub_token(session.get("hub_token", ""))
        if identity is None:
            session.clear()
            return None
        session.update(identity=identity.to_session(), checked_at=time.time())
        return identity
    return Identity.from_session(data)


def resolve_hub_token(token: str) -> Identity | None:
    """Return the user owning a hub token who may use this service, else None.

    The hub is asked one request thread at a time (HubAuth's blocking calls
    share one event loop); a known token is answered from HubAuth's cache.
    """
    auth = hub_auth()
    if auth is None or not token:
        return None
    with _HUB_CALLS:
        model = auth.user_for_token(token)
    if model is None or (auth.access_scopes and not auth.check_scopes(auth.access_scopes, model)):
        return None
    return identity_from_hub(model)


def safe_next(url: object) -> str:
    """Return ``url`` if it is a page of this app, else the home page
    (:func:`coursehub.web.redirects.safe_next` with the app's prefix)."""
    return plan_safe_next(url, url_for("browse.index"))


@bp.get("/login")
def login() -> Response:
    """Send the visitor to the hub's OAuth authorisation page."""
    auth = hub_auth()
    if auth is None:
        abort(404, description="sign-in is handled by JupyterHub, which is not configured")
    verifier, challenge, method = auth.generate_pkce_code_challenge()
    state = secrets.token_urlsafe(16)
    back = safe_next(request.args.get("next"))
    session["oauth"] = {"state": state, "verifier": verifier, "next": back}
    query = {"state": state, "code_challenge": challenge, "code_challenge_method": method}
    return redirect(auth.login_url + "&" + urlencode(query))


@bp.get("/oauth_callback")
def oauth_callback() -> Response:
    """Finish the OAuth login: check the state, exchange the code, cache the user."""
    auth = hub_auth()
    pending = session.pop("oauth", None)
    code, state = request.args.get("code"), request.args.get("state", "")
    if auth is None or not pending or not code:
        abort(403, description="no sign-in in progress; start again from the home page")
    expected = str(pending.get("state", "")).encode("utf-8", "replace")
    if not hmac.compare_digest(state.encode("utf-8", "replace"), expected):
        abort(403, description="sign-in state does not match; start again from the home page")
    with _HUB_CALLS:
        token = auth.token_for_code(code, code_verifier=pending["verifier"])
    identity = resolve_hub_token(token)
    if identity is None:
        abort(403, description="your hub account may not use the course app")
    session.clear()
    session.update(identity=identity.to_session(), hub_token=token, checked_at=time.time())
    return redirect(safe_next(pending.get("next")))


@bp.post("/logout")
def logout() -> Response:
    """Forget the user; in hub mode, continue to the hub's logout page."""
    session.clear()
    auth = hub_auth()
    if auth is not None:
        return redirect(auth.hub_host + auth.hub_prefix + "logout")
    return redirect(url_for("browse.index"))
