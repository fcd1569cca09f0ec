"""LTI 1.3 sign-in from the LMS, in the hub process, beside the hub's password login.

:class:`CoursehubLTIAuthenticator` is jupyterhub-ltiauthenticator's
``LTI13Authenticator`` (https://github.com/jupyterhub/ltiauthenticator) with
three changes:

- Several platform registrations (:attr:`~CoursehubLTIAuthenticator.platforms`,
  each an issuer with its client ids, deployment ids, authorization and
  key-set URLs, rendered by ``coursehub hub config --lti``) instead of one:
  the login initiation picks the registration by its ``iss`` (and
  ``client_id``), the launch by the ``id_token``'s ``iss``; a launch from an
  unregistered deployment is refused (upstream does not check
  ``deployment_id``).
- The course app decides who the person is: :meth:`authenticate` posts the
  verified claims to its ``POST /api/v1/lti/launch`` (``launch_url``, with
  ``launch_token``), which records the nonce (a replay is refused), maps the
  LMS course to a course and the course roles to a catalog role, enrols the
  person and syncs that course into the hub: no hub restart. This process
  never imports the catalog (docs/architecture.md). The request carries the
  hub's admins (:meth:`~CoursehubLTIAuthenticator.hub_admins`), whom the
  course app never maps a launch onto; and a launch the course app names a
  hub admin is refused here too: admins sign in on the login page only.
- The hub's own login page stays: ``/hub/login`` is the form of
  :attr:`~CoursehubLTIAuthenticator.password_authenticator_class` (PAM by
  default), for admins and teams; the LMS uses ``/hub/lti13/oauth_login``
  and ``/hub/lti13/oauth_callback``. A subclass rather than
  jupyterhub-multiauthenticator, which prefixes every username with its
  service name (``lti13:p2500001``): the roster's ``p2500001`` and the
  LMS's would then be two hub users.
"""

from __future__ import annotations

import json
from typing import Any

import jwt
from jupyterhub.auth import Authenticator
from jupyterhub.utils import maybe_future, url_path_join
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.error import TokenError
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler, LTI13LoginInitHandler
from ltiauthenticator.lti13.validator import LTI13LaunchValidator
from ltiauthenticator.utils import convert_request_to_dict
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httputil import url_concat
from tornado.web import HTTPError
from traitlets import Dict, Float, List, Unicode, import_item

from coursehub.spawn.ltiregistration import (
    Platform,
    find_platform,
    launch_body,
    parse_platform,
    unknown_platform,
)

DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
#: Key of the authentication model marking a launch the course app accepted.
ACCEPTED = "coursehub_lti_accepted"


def admin_refusal(name: str) -> HTTPError:
    """The refusal of a launch that names a hub admin."""
    return HTTPError(
        403,
        f"hub user {name[:128]} is a hub admin: hub admins sign in on the hub's login page, "
        "never from the LMS",
    )


def plan_state_cookie(https: bool) -> dict[str, Any]:
    """Return the options of the launch's state and nonce cookies (pure).

    The platform sends the launch back with a cross-site form POST, and
    browsers send a cookie on such a request only with ``SameSite=None``,
    which they accept only with ``Secure`` (RFC 6265bis "SameSite" and
    Chrome's "SameSite=None requires Secure"; jupyterhub/ltiauthenticator#157).
    Over HTTPS the cookies get both; over plain HTTP ``Secure`` is impossible,
    so the browser's default (``Lax``) stays: Chromium still sends such a
    cookie with a cross-site POST while it is less than 2 minutes old (its
    temporary "Lax+POST" exception, https://www.chromium.org/updates/same-site/faq/),
    so a quick launch may pass, and any other ends with
    :func:`missing_state_message`.
    """
    options: dict[str, Any] = {"expires_days": 1, "httponly": True, "encrypted": True}
    if https:
        options.update(samesite="None", secure=True)
    return options


def missing_state_message(https: bool) -> str:
    """Return what a launch whose state cookie did not come back tells the student (pure)."""
    if https:
        return (
            "the LMS launch came back without this hub's sign-in cookie: your browser blocks "
            "cookies of other sites; allow them for this hub, or open the activity in a new window"
        )
    return (
        "the LMS launch came back without this hub's sign-in cookie: browsers send it back to "
        "a hub reached over plain HTTP only from the hub's own pages; the hub admin must serve "
        "the hub over HTTPS for LMS launches"
    )


def is_https(handler: Any) -> bool:
    """Return whether the hub's public address (else the request) is HTTPS (as JupyterHub)."""
    public_url = handler.settings.get("public_url")
    if public_url:
        return bool(public_url.scheme == "https")
    return bool(handler.request.protocol == "https")


class CoursehubLoginInitHandler(LTI13LoginInitHandler):
    """OIDC login initiation: redirect to the authorization URL of the platform in ``iss``."""

    def _set_oauth_cookie(self, key: str, value: Any) -> None:
        """Set the state or nonce cookie so that the platform's cross-site POST brings it back."""
        self._set_cookie(key, value, **plan_state_cookie(is_https(self)))

    def authorize_redirect(
        self,
        redirect_uri: str,
        login_hint: str,
        nonce: str,
        client_id: str | None,
        state: str,
        lti_message_hint: str | None = None,
    ) -> None:
        """Send the browser to the platform's authorization endpoint (LTI 1.3 security
        framework, section 5.1.1.2, https://www.imsglobal.org/spec/security/v1p0/)."""
        issuer = self.get_argument("iss", "")
        platform = find_platform(self.authenticator.platform_list, issuer, client_id)
        if platform is None:
            raise unknown_platform(issuer)
        args = {
            "response_type": "id_token",
            "scope": "openid",
            "response_mode": "form_post",
            "prompt": "none",
            "client_id": client_id or platform.client_ids[0],
            "redirect_uri": redirect_uri,
            "login_hint": login_hint,
            "nonce": nonce,
            "state": state,
        }
        if lti_message_hint is not None:
            args["lti_message_hint"] = lti_message_hint
        self.redirect(url_concat(platform.authorize_url, args))


class CoursehubCallbackHandler(LTI13CallbackHandler):
    """The launch: verify the ``id_token`` against its own platform's registration."""

    platform: Platform | None = None
    coursehub_next_url: str | None = None

    def check_state(self) -> None:
        """Upstream's state check; a missing state cookie says why (:func:`missing_state_message`).

        Raises
        ------
        tornado.web.HTTPError
            400, without the state cookie or with another state than the URL's.
        """
        if not self._get_state_cookie():
            raise HTTPError(400, missing_state_message(is_https(self)))
        super().check_state()

    def decode_and_validate_launch_request(self) -> dict[str, Any]:
        """Upstream's checks (state, signature by the platform's key set, issuer, audience,
        expiry, required claims, ``azp``, nonce against the cookie), with this
        registration's values, plus the deployment id."""
        validator = LTI13LaunchValidator(parent=self.app)
        args = convert_request_to_dict(self.request.arguments)
        validator.validate_auth_response(args)
        self.check_state()
        encoded = args["id_token"]
        try:
            unverified = jwt.decode(encoded, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            raise TokenError(f"the id_token cannot be read: {exc}") from None
        issuer = str(unverified.get("iss") or "")
        platform = find_platform(self.authenticator.platform_list, issuer)
        if platform is None:
            raise unknown_platform(issuer)
        id_token: dict[str, Any] = validator.verify_and_decode_jwt(
            encoded_jwt=encoded,
            issuer=platform.issuer,
            audience=list(platform.client_ids),
            jwks_endpoint=platform.jwks_url,
            jwks_algorithms=self.authenticator.jwks_algorithms,
        )
        validator.validate_id_token(id_token)
        validator.validate_azp_claim(id_token, platform.client_ids)
        deployment = str(id_token.get(DEPLOYMENT_CLAIM) or "")
        if deployment not in platform.deployment_ids:
            raise HTTPError(
                403,
                f"the LMS deployment {deployment[:100]!r} of {platform.issuer} is not registered "
                "with this hub: ask the hub admin to add it (coursehub hub config --lti)",
            )
        self.check_nonce(id_token)
        self.platform = platform
        return id_token

    async def redirect_to_next_url(self, user: Any) -> None:
        """Go to the deep link the course app built (a hub path), else upstream's next URL."""
        target = self.coursehub_next_url
        if target and target.startswith(self.hub.base_url) and "//" not in target:
            self.redirect(target)
            return
        await super().redirect_to_next_url(user)


class CoursehubLTIAuthenticator(LTI13Authenticator):
    """LTI 1.3 launches for several platforms, the course app deciding, plus a password login."""

    login_service = ""  # the hub's login page shows the password form

    platforms = List(
        Dict(),
        config=True,
        help="Platform registrations: dicts with issuer, client_ids, deployment_ids, "
        "authorize_url, jwks_url, username_claim, student_number_claim, token_url.",
    )
    launch_url = Unicode(
        config=True, help="The course app's POST /api/v1/lti/launch URL, as the hub reaches it."
    )
    launch_token = Unicode(config=True, help="Token the course app expects on launch requests.")
    launch_timeout_s = Float(
        30.0, config=True, help="Seconds the course app may take to enrol and sync."
    )
    password_authenticator_class = Unicode(
        "pam",
        config=True,
        help="Authenticator of the hub's login form (entry point name or import path).",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.platform_list = tuple(parse_platform(dict(p)) for p in self.platforms)
        cls = _load_authenticator(self.password_authenticator_class)
        self.password_authenticator = cls(parent=self)

    def login_url(self, base_url: str) -> str:
        """The hub's own login page (the password form)."""
        return str(Authenticator.login_url(self, base_url))

    def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
        """The LMS's two endpoints: login initiation and launch (redirect URI)."""
        return [
            ("/lti13/oauth_login", CoursehubLoginInitHandler),
            ("/lti13/oauth_callback", CoursehubCallbackHandler),
        ]

    def lti_login_url(self, base_url: str) -> str:
        """The OIDC login initiation URL to register in the LMS."""
        return str(url_path_join(base_url, "lti13", "oauth_login"))

    async def authenticate(self, handler: Any, data: Any = None) -> Any:
        """A launch: ask the course app; a login form: the password authenticator."""
        if isinstance(handler, CoursehubCallbackHandler):
            return await self.launch(handler, data or {})
        return await maybe_future(self.password_authenticator.authenticate(handler, data))

    def check_allowed(self, username: str, authentication: Any = None) -> Any:
        """Launches the course app accepted; else the hub's allowed users, or the password
        authenticator's own rule (e.g. PAM's ``allowed_groups``)."""
        if isinstance(authentication, dict) and authentication.get(ACCEPTED):
            return True
        if super().check_allowed(username, authentication):
            return True
        return self.password_authenticator.check_allowed(username, authentication)

    def hub_admins(self, handler: Any) -> set[str]:
        """The hub's admins: ``admin_users`` and every user the hub's database marks admin."""
        from jupyterhub import orm

        names = {str(name) for name in self.admin_users}
        db = getattr(handler, "db", None)
        if db is not None:
            names |= {user.name for user in db.query(orm.User).filter(orm.User.admin.is_(True))}
        return names

    async def launch(self, handler: CoursehubCallbackHandler, claims: dict[str, Any]) -> Any:
        """Post the verified claims to the course app; return the hub user it names.

        Raises
        ------
        tornado.web.HTTPError
            403 with the course app's message for a refusal, or when it names a hub
            admin; 503 when the course app cannot be reached or answers otherwise.
        """
        platform = handler.platform
        assert platform is not None
        admins = self.hub_admins(handler)
        body = launch_body(platform, claims, tuple(admins))
        request = HTTPRequest(
            self.launch_url,
            method="POST",
            body=json.dumps(body),
            headers={
                "Authorization": f"token {self.launch_token}",
                "Content-Type": "application/json",
            },
            request_timeout=self.launch_timeout_s,
        )
        response = await AsyncHTTPClient().fetch(request, raise_error=False)
        try:
            answer = json.loads(response.body or b"{}")
        except ValueError:
            answer = {}
        if response.code == 200 and answer.get("name"):
            if str(answer["name"]) in admins:
                self.log.error("LTI launch: the course app named hub admin %s", answer["name"])
                raise admin_refusal(str(answer["name"]))
            handler.coursehub_next_url = answer.get("next")
            self.log.info(
                "LTI launch: %s as %s of %s", answer["name"], answer["role"], answer["course_id"]
            )
            return {
                "name": answer["name"],
                "auth_state": {"lti_course_id": answer["course_id"], "lti_role": answer["role"]},
                ACCEPTED: True,
            }
        if response.code in (400, 403) and answer.get("error"):
            raise HTTPError(403, str(answer["error"]))
        self.log.error("LTI launch: the course app answered %s: %s", response.code, answer)
        raise HTTPError(503, "the course app could not check this launch: try again in a minute")


def _load_authenticator(name: str) -> Any:
    """Return the authenticator class of an entry point name (``pam``) or an import path."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="jupyterhub.authenticators"):
        if entry.name.lower() == name.lower():
            return entry.load()
    return import_item(name)
