"""A typed client over JupyterHub's REST API (``/hub/api``), built on ``requests``.

Every request carries ``Authorization: token T``. Connection errors, read
errors and 5xx answers are retried with exponential backoff by urllib3's
:class:`~urllib3.util.retry.Retry` (bounded attempts, see
:class:`RetryPolicy`); what still fails becomes :class:`HubUnreachableError`
(no answer) or :class:`HubError` (an answer, with the hub's message).

Endpoints and scopes: JupyterHub REST API reference (5.x/6.x),
``jupyterhub/apihandlers/{users,groups,services}.py``. Lists are paginated
with ``Accept: application/jupyterhub-pagination+json``; the hub caps a page
at ``c.JupyterHub.api_page_max_limit`` (200 by default).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from coursehub.errors import CoursehubError, UsageError

PAGINATION_MEDIA_TYPE = "application/jupyterhub-pagination+json"
#: Status codes retried: the hub or its proxy failing or restarting.
RETRY_STATUSES = (500, 502, 503, 504)


class HubError(CoursehubError):
    """The hub answered a request with an error status (4xx, or 5xx after the retries).

    Attributes ``status`` (HTTP status), ``message`` (the hub's own message
    from its JSON body), ``method`` and ``path`` (relative to the API URL).
    """

    def __init__(self, status: int, message: str, method: str, path: str) -> None:
        self.status, self.message, self.method, self.path = status, message, method, path
        super().__init__(f"hub API {method} {path}: {status} {message}")


class HubUnreachableError(CoursehubError):
    """No answer from the hub at ``url`` after the retries (refused, reset, timed out)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url, self.reason = url, reason
        super().__init__(f"JupyterHub at {url} is unreachable: {reason}")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry a failed request.

    ``attempts`` tries in all (>= 1); the wait before retry k is
    ``backoff_s * 2**(k-1)`` seconds, at most ``backoff_max_s`` (urllib3's
    exponential backoff); ``timeout_s`` bounds each connect and read.
    """

    attempts: int = 5
    backoff_s: float = 0.25
    backoff_max_s: float = 8.0
    timeout_s: float = 30.0

    def urllib3_retry(self) -> Retry:
        """Return the equivalent :class:`urllib3.util.retry.Retry` (all methods retried)."""
        retries = max(self.attempts - 1, 0)
        return Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            other=0,
            allowed_methods=None,
            status_forcelist=RETRY_STATUSES,
            backoff_factor=self.backoff_s,
            backoff_max=self.backoff_max_s,
            raise_on_status=False,
            respect_retry_after_header=True,
        )


def normalize_api_url(url: str) -> str:
    """Return the hub's API URL for ``url``, a hub base URL or an API URL.

    ``http://host:8000`` and ``http://host:8000/`` become
    ``http://host:8000/hub/api``; a URL with another path is kept (without a
    trailing slash). Raises :class:`UsageError` for anything but http(s).
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"hub URL {url!r} is not an http(s) URL")
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path or '/hub/api'}"


class HubClient:
    """Client for one hub's REST API.

    Parameters
    ----------
    api_url : str
        The API URL (``http://host:8000/hub/api``) or the hub's base URL.
    token : str
        An API token (a service's ``api_token`` or a user's token).
    retry : RetryPolicy, optional
        Retries of connection errors and 5xx answers.
    """

    def __init__(self, api_url: str, token: str, retry: RetryPolicy | None = None) -> None:
        if not token:
            raise UsageError(f"no API token given for the hub at {api_url}")
        self.api_url = normalize_api_url(api_url)
        self.retry = retry or RetryPolicy()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {token}"
        adapter = HTTPAdapter(max_retries=self.retry.urllib3_retry())
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def close(self) -> None:
        """Close the pooled connections."""
        self.session.close()

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON answer (None for an empty body).

        Raises
        ------
        HubError
            For an error status (4xx; 5xx once the retries are spent).
        HubUnreachableError
            When no answer came back after the retries.
        """
        response = self.send(method, path, body=body, params=params, headers=headers)
        return response.json() if response.content else None

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send one request and return the raw response; errors as in :meth:`request`."""
        try:
            response = self.session.request(
                method,
                self.api_url + path,
                json=body,
                params=params,
                headers=headers,
                timeout=self.retry.timeout_s,
            )
        except requests.RequestException as exc:
            raise HubUnreachableError(self.api_url, _short_reason(exc)) from exc
        if response.status_code >= 400:
            raise HubError(response.status_code, _hub_message(response), method, path)
        return response

    def paginate(self, path: str, page_size: int = 200) -> Iterator[dict[str, Any]]:
        """Yield every item of a paginated list, following ``_pagination.next``."""
        params: dict[str, Any] = {"offset": 0, "limit": page_size}
        while True:
            page = self.request(
                "GET", path, params=params, headers={"Accept": PAGINATION_MEDIA_TYPE}
            )
            if isinstance(page, list):  # a hub without pagination answers the whole list
                yield from page
                return
            yield from page["items"]
            after = page["_pagination"].get("next")
            if not after:
                return
            params = {"offset": after["offset"], "limit": after["limit"]}

    # users ---------------------------------------------------------------

    def list_users(self) -> list[dict[str, Any]]:
        """Return every user model (``name``, ``admin``, ``groups``, ``servers``...)."""
        return list(self.paginate("/users"))

    def get_user(self, name: str) -> dict[str, Any]:
        """Return one user's model, including ``servers`` (raises HubError 404 if none)."""
        result: dict[str, Any] = self.request("GET", f"/users/{_q(name)}")
        return result

    def find_user(self, name: str) -> dict[str, Any] | None:
        """Return one user's model (``name``, ``admin``, ``groups``...); None if there is none."""
        try:
            return self.get_user(name)
        except HubError as exc:
            if exc.status == 404:
                return None
            raise

    def count_users(self) -> int:
        """Return how many users the hub has (``_pagination.total`` of a one-user page).

        Raises HubError when the hub does not paginate (JupyterHub < 2.0).
        """
        page = self.request(
            "GET", "/users", params={"limit": 1}, headers={"Accept": PAGINATION_MEDIA_TYPE}
        )
        if not isinstance(page, dict):
            raise HubError(501, "the hub does not paginate its user list", "GET", "/users")
        return int(page["_pagination"]["total"])

    def create_users(self, names: Iterable[str], chunk_size: int = 500) -> list[str]:
        """Create users in bulk, ``chunk_size`` names per request; return the names created.

        Names that already exist are skipped by the hub (a chunk made only
        of existing users answers 409, tolerated here). Raises HubError 400
        for an invalid username (the whole chunk is then refused).
        """
        created: list[str] = []
        names = list(names)
        for start in range(0, len(names), chunk_size):
            chunk = names[start : start + chunk_size]
            try:
                models = self.request("POST", "/users", body={"usernames": chunk})
            except HubError as exc:
                if exc.status != 409:
                    raise
                continue
            created.extend(model["name"] for model in models)
        return created

    def delete_user(self, name: str, missing_ok: bool = True) -> None:
        """Delete a user (its servers stop first); a missing user is fine with ``missing_ok``."""
        self._delete(f"/users/{_q(name)}", missing_ok)

    # groups --------------------------------------------------------------

    def list_groups(self) -> list[dict[str, Any]]:
        """Return every group model (``name``, ``users``, ``properties``, ``roles``)."""
        return list(self.paginate("/groups"))

    def get_group(self, name: str) -> dict[str, Any] | None:
        """Return one group's model (``name``, ``users``, ``properties``); None if it is missing."""
        try:
            result: dict[str, Any] = self.request("GET", f"/groups/{_q(name)}")
        except HubError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    def create_group(self, name: str, users: Iterable[str] = (), exist_ok: bool = True) -> None:
        """Create a group, optionally with members; an existing group is fine with ``exist_ok``."""
        try:
            self.request("POST", f"/groups/{_q(name)}", body={"users": list(users)})
        except HubError as exc:
            if not (exist_ok and exc.status == 409):
                raise

    def delete_group(self, name: str, missing_ok: bool = True) -> None:
        """Delete a group (not its users); a missing group is fine with ``missing_ok``."""
        self._delete(f"/groups/{_q(name)}", missing_ok)

    def add_group_users(self, name: str, users: Iterable[str]) -> None:
        """Add users to a group in one request (members already there are ignored)."""
        self.request("POST", f"/groups/{_q(name)}/users", body={"users": list(users)})

    def remove_group_users(self, name: str, users: Iterable[str]) -> None:
        """Remove users from a group in one request (non-members are ignored)."""
        self.request("DELETE", f"/groups/{_q(name)}/users", body={"users": list(users)})

    def set_group_properties(self, name: str, properties: Mapping[str, Any]) -> None:
        """Replace a group's properties (any JSON object) with ``properties``."""
        self.request("PUT", f"/groups/{_q(name)}/properties", body=dict(properties))

    # servers -------------------------------------------------------------

    def start_server(self, user: str, options: Mapping[str, Any] | None = None) -> int:
        """Ask the hub to start a user's default server; return 201 (started) or 202 (pending)."""
        path = f"/users/{_q(user)}/server"
        return self.send("POST", path, body=dict(options or {})).status_code

    def stop_server(self, user: str) -> int:
        """Ask the hub to stop a user's default server; return 204 (stopped) or 202 (pending).

        Stopping a server that is not running is not an error (204).
        """
        return self.send("DELETE", f"/users/{_q(user)}/server").status_code

    def stop_servers(self, user: str) -> list[str]:
        """Ask the hub to stop every server of ``user``; return their names ("" the default).

        JupyterHub's ``DELETE /users/{name}/server`` and ``.../servers/{server_name}``;
        a user the hub does not know has none.
        """
        model = self.find_user(user) or {}
        names = sorted(model.get("servers") or {})
        for name in names:
            tail = f"servers/{_q(name)}" if name else "server"
            self.send("DELETE", f"/users/{_q(user)}/{tail}")
        return names

    def server_status(self, user: str) -> dict[str, Any] | None:
        """Return a user's default server model (``ready``, ``pending``, ``url``), or None."""
        servers: dict[str, Any] = self.get_user(user).get("servers") or {}
        return servers.get("")

    # services ------------------------------------------------------------

    def list_services(self) -> list[dict[str, Any]]:
        """Return the service models the token may read."""
        return list(self.request("GET", "/services").values())

    def create_service(self, name: str, model: Mapping[str, Any]) -> dict[str, Any]:
        """Register an external service at runtime (JupyterHub 5.0+; ``admin:services``)."""
        result: dict[str, Any] = self.request("POST", f"/services/{_q(name)}", body=dict(model))
        return result

    def delete_service(self, name: str, missing_ok: bool = True) -> None:
        """Remove a service created at runtime (services from the config file cannot be)."""
        self._delete(f"/services/{_q(name)}", missing_ok)

    def _delete(self, path: str, missing_ok: bool) -> None:
        try:
            self.request("DELETE", path)
        except HubError as exc:
            if not (missing_ok and exc.status == 404):
                raise


def client_from_env(
    hub_url: str | None = None,
    token_env: str | None = None,
    environ: Mapping[str, str] | None = None,
    retry: RetryPolicy | None = None,
) -> HubClient:
    """Build a client from the arguments and the environment.

    The URL: ``hub_url``, else ``COURSEHUB_HUB_API_URL``, else
    ``JUPYTERHUB_API_URL`` (set by the hub for its services). The token: the
    variable named ``token_env``, else ``COURSEHUB_HUB_API_TOKEN``, else
    ``JUPYTERHUB_API_TOKEN``. Raises :class:`UsageError` naming what is missing.
    """
    env = os.environ if environ is None else environ
    url = hub_url or env.get("COURSEHUB_HUB_API_URL") or env.get("JUPYTERHUB_API_URL")
    if not url:
        raise UsageError("no hub URL: pass --hub-url or set COURSEHUB_HUB_API_URL")
    names = [token_env] if token_env else ["COURSEHUB_HUB_API_TOKEN", "JUPYTERHUB_API_TOKEN"]
    token = next((env[name] for name in names if env.get(name)), "")
    if not token:
        raise UsageError(f"no hub API token for {url}: set {' or '.join(names)}")
    return HubClient(url, token, retry=retry)


def _q(name: str) -> str:
    return quote(name, safe="")


def _hub_message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.reason or response.text[:200]
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return response.reason or str(body)[:200]


def _short_reason(exc: requests.RequestException) -> str:
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return str(reason or exc)[:300]
