"""The Flask application factory of the course web app (see :func:`create_app`).

``create_app(test_config=None)`` layers its configuration (defaults, then
``COURSEHUB_*`` variables, then the ``JUPYTERHUB_*`` variables a hub gives to
its services, then ``test_config``), refuses to start without a way to
identify users or on an outdated catalog schema, and registers the
blueprints. Nothing is read from the environment at import time.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Any

from flask import Flask, request
from flask_wtf.csrf import CSRFProtect
from werkzeug.exceptions import NotFound
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.wrappers import Response

from coursehub.web import adminapi, api, auth, database, errors, hubsync, ltiapi, materialapi, views
from coursehub.web.config import DEFAULTS, plan_auth_mode, plan_prefix, read_hub_env
from coursehub.web.redirects import plan_location


def create_app(
    test_config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Flask:
    """Create and configure the course web app.

    Parameters
    ----------
    test_config : mapping, optional
        Overrides applied last (``TESTING``, ``DATABASE_URL``, ``DEV_USER``...).
    environ : mapping, optional
        Where the ``JUPYTERHUB_*`` variables are read; default ``os.environ``.

    Returns
    -------
    flask.Flask
        The app; when served under a hub prefix (``/services/NAME/``) its WSGI
        callable answers only below that prefix.

    Raises
    ------
    coursehub.errors.UsageError
        Without hub variables and without an explicit development user.
    coursehub.catalog.errors.SchemaError
        If the catalog database is empty or older than the code.
    """
    app = Flask(__name__)
    app.config.from_mapping(DEFAULTS)
    app.config.from_prefixed_env("COURSEHUB")
    app.config.from_mapping(read_hub_env(os.environ if environ is None else environ))
    if test_config is not None:
        app.config.from_mapping(test_config)
    mode = plan_auth_mode(app.config, app.testing)
    if not app.config["SECRET_KEY"]:
        # sessions then last as long as the process; set COURSEHUB_SECRET_KEY to keep them
        app.config["SECRET_KEY"] = secrets.token_hex(32)
    _mount(app, plan_prefix(app.config))
    database.init_app(app)
    hubsync.init_app(app)
    csrf = CSRFProtect(app)
    csrf.exempt(api.bp)
    csrf.exempt(adminapi.bp)
    auth.init_app(app, mode)
    views.init_app(app)
    api.init_app(app)
    adminapi.init_app(app)
    ltiapi.init_app(app)
    materialapi.init_app(app)
    errors.init_app(app)
    app.after_request(relative_redirect)
    return app


def relative_redirect(response: Response) -> Response:
    """Make a redirect to this host a path (:func:`coursehub.web.redirects.plan_location`)."""
    location = response.headers.get("Location")
    if location and 300 <= response.status_code < 400:
        response.headers["Location"] = plan_location(location, request.host)
    return response


def _mount(app: Flask, prefix: str) -> None:
    """Serve the app below ``prefix`` (the hub does not strip a service's prefix)."""
    if prefix == "/":
        return
    app.config["SESSION_COOKIE_PATH"] = prefix
    app.wsgi_app = DispatcherMiddleware(NotFound(), {prefix.rstrip("/"): app.wsgi_app})  # type: ignore[method-assign]
