"""The hub: its API reachable with the service token and its scopes; LTI launches over HTTPS."""

from __future__ import annotations

from collections.abc import Mapping

from coursehub.doctor.result import CheckResult, fail, ok, skip

#: What ``coursehub hub sync`` needs of its token (JupyterHub's scopes, ``jupyterhub/scopes.py``;
#: the course app's service role in ``hub/templates/jupyterhub_config.py.j2`` holds them).
SYNC_SCOPES = ("admin:users", "admin:groups", "list:users", "read:users")


def check_hub(
    hub_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    scopes: tuple[str, ...] = SYNC_SCOPES,
) -> CheckResult:
    """Ask the hub who the token is (``GET /user``) and compare its scopes with ``scopes``.

    The URL and token are :func:`coursehub.hub.hubclient.client_from_env`'s
    (``hub_url``, else ``COURSEHUB_HUB_API_URL``/``JUPYTERHUB_API_URL``,
    ``COURSEHUB_HUB_API_TOKEN``/``JUPYTERHUB_API_TOKEN``); skipped when
    either is unset. JupyterHub answers ``GET /user`` with the token owner's
    model, whose ``scopes`` are the token's expanded scopes (JupyterHub's
    REST API, "Return authenticated user's model").
    """
    from coursehub.errors import CoursehubError, UsageError
    from coursehub.hub.hubclient import HubError, RetryPolicy, client_from_env

    try:
        client = client_from_env(
            hub_url, environ=environ, retry=RetryPolicy(attempts=1, timeout_s=10)
        )
    except UsageError as exc:
        return skip("hub", f"{exc}: not checked")
    with client:
        try:
            model = client.request("GET", "/user") or {}
        except HubError as exc:
            return fail(
                "hub",
                f"the hub at {client.api_url} refused the token ({exc.status} {exc.message}): "
                "give the course app's service token (COURSEHUB_HUB_API_TOKEN)",
            )
        except CoursehubError as exc:
            return fail("hub", f"{exc}: start the hub, or correct COURSEHUB_HUB_API_URL")
    owner = model.get("name", "?")
    missing = [scope for scope in scopes if scope not in set(model.get("scopes", ()))]
    if missing:
        return fail(
            "hub",
            f"the token of {owner} at {client.api_url} lacks the scopes {', '.join(missing)}: "
            "the hub sync cannot run; add them to its role (c.JupyterHub.load_roles)",
        )
    return ok("hub", f"{client.api_url} answers; the token of {owner} has {', '.join(scopes)}")


def check_lti(lti: str | None, bind_url: str, public_url: str = "") -> CheckResult:
    """Fail when the hub takes LTI launches at a plain-HTTP public address.

    ``lti``, ``bind_url`` and ``public_url`` are ``coursehub hub config``'s
    ``--lti``, ``--bind-url`` and ``--public-url``; the line is the one that
    command prints (:func:`coursehub.hub.ltiplatforms.plan_https_warning`).
    Skipped without ``--lti``.
    """
    from coursehub.errors import CoursehubError
    from coursehub.hub.ltiplatforms import plan_https_warning, read_registrations

    if not lti:
        return skip("lti", "no --lti FILE given: the hub takes no LMS launches")
    try:
        platforms = read_registrations(lti)
    except CoursehubError as exc:
        return fail("lti", str(exc))
    warning = plan_https_warning(bind_url, public_url)
    if warning:
        return fail("lti", warning)
    address = public_url or bind_url
    return ok("lti", f"{len(platforms)} LMS platform(s) launch at {address} over HTTPS")
