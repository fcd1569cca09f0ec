"""The Flask application factory of the course web app (see :func:`create_app`).

``create_app(test_config=None)`` layers its configuration (defaults, then
``COURSEHUB_*`` variables, then the ``JUPYTERHUB_*`` variables a hub gives to
its services, then ``test_config``), refuses to start without a way to
identify users or on an outdated catalog schema, and registers every
blueprint here: :data:`BLUEPRINTS` (sign-in, pages, JSON API), of which
:data:`CSRF_EXEMPT` (the API: tokens, never cookies) skips the CSRF check.
Nothing is read from the environment at import time.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Flask, request
from flask_wtf.csrf import CSRFProtect
from werkzeug.exceptions import NotFound
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.wrappers import Response

import coursehub.web.auth as auth
import coursehub.web.database as database
import coursehub.web.errors as errors
import coursehub.web.hubsync as hubsync
from coursehub.web.api import admin as admin_api
from coursehub.web.api import budgets as budgets_api
from coursehub.web.api import courses as courses_api
from coursehub.web.api import exams as exams_api
from coursehub.web.api import lti as lti_api
from coursehub.web.api import material as material_api
from coursehub.web.api.base import API_PREFIX
from coursehub.web.config import (
    DEFAULTS,
    plan_auth_mode,
    plan_prefix,
    plan_proxy_hops,
    read_hub_env,
)
from coursehub.web.redirects import plan_location
from coursehub.web.views import (
    admin,
    books,
    browse,
    budgets,
    courseenv,
    courses,
    exams,
    grading,
    groups,
    lti,
    ltigrades,
    material,
    people,
    portals,
    profiles,
    roster,
    team,
    teamaccess,
    usage,
)
from coursehub.web.views.base import (
    navigation,
    refuse_page_changes_to_read_only_courses,
    require_login,
)

#: Every blueprint of the app with its URL prefix (None: at the root), in the order
#: registered: sign-in, the pages (course books: docs/books.md, usage: docs/usage.md, grades
#: to the LMS: docs/lti.md), the JSON API (courses, their material, budget and exams
#: (docs/exams.md), the catalog's administration, the LMS launch and the tool's key set), the
#: LMS links.
BLUEPRINTS: tuple[tuple[Blueprint, str | None], ...] = (
    (auth.bp, None),
    (browse.bp, None),
    (courses.bp, None),
    (groups.bp, None),
    (team.bp, None),
    (roster.bp, None),
    (profiles.bp, None),
    (people.bp, None),
    (grading.bp, None),
    (material.bp, None),
    (admin.bp, None),
    (portals.bp, None),
    (courseenv.bp, None),
    (teamaccess.bp, None),
    (books.bp, None),
    (usage.bp, None),
    (budgets.bp, None),
    (exams.bp, None),
    (ltigrades.bp, None),
    (courses_api.bp, API_PREFIX),
    (material_api.bp, API_PREFIX),
    (budgets_api.bp, API_PREFIX),
    (exams_api.bp, API_PREFIX),
    (admin_api.bp, API_PREFIX),
    (lti_api.bp, f"{API_PREFIX}/lti"),
    (lti.bp, None),
)
#: The blueprints read a token, never a cookie: no CSRF check.
CSRF_EXEMPT: tuple[Blueprint, ...] = (
    courses_api.bp,
    admin_api.bp,
    lti_api.bp,
    material_api.bp,
    budgets_api.bp,
    exams_api.bp,
)


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
    _behind_proxies(app, plan_proxy_hops(app.config, mode))
    database.init_app(app)
    hubsync.init_app(app)
    csrf = CSRFProtect(app)
    for blueprint in CSRF_EXEMPT:
        csrf.exempt(blueprint)
    auth.init_app(app, mode)
    for blueprint, url_prefix in BLUEPRINTS:
        app.register_blueprint(blueprint, url_prefix=url_prefix)
    app.before_request(require_login)
    app.before_request(refuse_page_changes_to_read_only_courses)
    app.context_processor(navigation)
    errors.init_app(app)
    app.after_request(relative_redirect)
    return app


def relative_redirect(response: Response) -> Response:
    """Make a redirect to this host a path (:func:`coursehub.web.redirects.plan_location`)."""
    location = response.headers.get("Location")
    if location and 300 <= response.status_code < 400:
        response.headers["Location"] = plan_location(location, request.host)
    return response


def _behind_proxies(app: Flask, hops: int) -> None:
    """Read the client's address from the ``hops`` proxies' ``X-Forwarded-For`` (werkzeug's
    ProxyFix, which trusts only the values those proxies appended); 0: the peer's address."""
    if hops:
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops)  # type: ignore[method-assign]


def _mount(app: Flask, prefix: str) -> None:
    """Serve the app below ``prefix`` (the hub does not strip a service's prefix)."""
    if prefix == "/":
        return
    app.config["SESSION_COOKIE_PATH"] = prefix
    app.wsgi_app = DispatcherMiddleware(NotFound(), {prefix.rstrip("/"): app.wsgi_app})  # type: ignore[method-assign]
