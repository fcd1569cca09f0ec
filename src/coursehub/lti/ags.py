"""The platform side of grade passback: an access token, an assignment's line item, its scores.

IMS LTI Assignment and Grade Services 2.0
(https://www.imsglobal.org/spec/lti-ags/v2p0/) over an OAuth 2.0
client-credentials token (IMS Security Framework 1.0, section 4.1; RFC 7523
client assertion, :func:`coursehub.lti.keys.client_assertion`):

- :func:`request_token`: ``POST token_url`` (``grant_type=client_credentials``,
  the JWT client assertion, the scopes) -> a bearer token.
- :func:`find_or_create_line_item`: ``GET lineitems?resource_id=NAME``
  (section 3.2.5, following ``Link: rel="next"`` pages), else ``POST
  lineitems`` with ``label``, ``scoreMaximum``, ``resourceId`` (section 3.2.4).
- :func:`post_score`: ``POST <lineitem>/scores`` (section 3.4), the score's
  URL being the line item's with ``/scores`` appended to its path
  (:func:`scores_url`).

Media types are those of the specification (section 3.2.1, 3.4.1).
Refusals raise :class:`PlatformRefusedError` naming the platform and the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from coursehub.errors import CoursehubError
from coursehub.lti.keys import client_assertion

LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
#: RFC 7523, section 2.2.
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: Seconds one HTTP request to the platform may take.
TIMEOUT_S = 20.0
#: Pages of line items read at most (100 items a page).
MAX_PAGES = 50


class PlatformRefusedError(CoursehubError):
    """The platform refused a step (token, line item), or could not be reached."""


@dataclass(frozen=True)
class LineItem:
    """A line item of the LMS gradebook: its URL (``id``), label, maximum, resource id."""

    url: str
    label: str
    score_maximum: float
    resource_id: str = ""
    created: bool = False


def scores_url(lineitem_url: str) -> str:
    """Return the scores URL of a line item: ``/scores`` appended to its path (pure).

    ``scores_url("https://lms/li/7?type_id=3") == "https://lms/li/7/scores?type_id=3"``
    (LTI AGS 2.0, section 3.4: the query string stays, Moodle's line item URLs have one).
    """
    parts = urlsplit(lineitem_url)
    path = parts.path.rstrip("/") + "/scores"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def render_score(
    user_id: str, score_given: float, score_maximum: float, timestamp: datetime
) -> dict[str, Any]:
    """Return the score body of one student (pure; LTI AGS 2.0, section 3.4.1).

    ``timestamp`` must be aware; it is written in ISO 8601 with milliseconds,
    as the specification's examples.
    """
    return {
        "userId": user_id,
        "scoreGiven": score_given,
        "scoreMaximum": score_maximum,
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": timestamp.isoformat(timespec="milliseconds"),
    }


def describe_answer(response: Any) -> str:
    """Return ``"HTTP 401: <start of body>"`` for a refused request (pure on its fields)."""
    text = " ".join(str(getattr(response, "text", "") or "").split())[:200]
    return f"HTTP {response.status_code}" + (f": {text}" if text else "")


def request_token(
    http: Any,
    platform: str,
    token_url: str,
    client_id: str,
    private_key: Any,
    scopes: tuple[str, ...],
) -> str:
    """Return a bearer token for ``scopes`` from the platform's token endpoint.

    ``http`` is a ``requests.Session``.

    Raises
    ------
    PlatformRefusedError
        The platform cannot be reached, refuses (e.g. an unknown key: the
        tool's key set is not registered), or answers without a token.
    """
    import requests

    form = {
        "grant_type": "client_credentials",
        "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": client_assertion(private_key, client_id, token_url),
        "scope": " ".join(scopes),
    }
    try:
        response = http.post(token_url, data=form, timeout=TIMEOUT_S)
    except requests.RequestException as exc:
        raise PlatformRefusedError(
            f"the LMS platform {platform} cannot be reached at its token URL {token_url}: {exc}"
        ) from None
    token = ""
    if response.status_code == 200:
        try:
            token = str(response.json().get("access_token") or "")
        except (ValueError, AttributeError):
            token = ""
    if not token:
        raise PlatformRefusedError(
            f"the LMS platform {platform} refused the tool an access token "
            f"({describe_answer(response)}); check that its tool registration has this "
            "tool's key set URL (/api/v1/lti/jwks.json) and client id "
            f"{client_id}, and allows grade services"
        )
    return token


def _line_item(data: Any, created: bool = False) -> LineItem | None:
    if not isinstance(data, dict) or not data.get("id"):
        return None
    try:
        maximum = float(data.get("scoreMaximum") or 0)
    except (TypeError, ValueError):
        maximum = 0.0
    return LineItem(
        str(data["id"]),
        str(data.get("label") or ""),
        maximum,
        str(data.get("resourceId") or ""),
        created,
    )


def find_or_create_line_item(
    http: Any,
    platform: str,
    lineitems_url: str,
    token: str,
    label: str,
    score_maximum: float,
) -> LineItem:
    """Return the line item whose ``resourceId`` is ``label`` in the LMS course, else a new one.

    Raises
    ------
    PlatformRefusedError
        If the platform refuses to list or to create line items, or answers
        something that is not a line item.
    """
    import requests

    auth = {"Authorization": f"Bearer {token}"}
    url: str | None = lineitems_url
    params: dict[str, Any] | None = {"resource_id": label, "limit": 100}
    try:
        for _ in range(MAX_PAGES):
            if url is None:
                break
            response = http.get(
                url, params=params, headers={**auth, "Accept": LINEITEMS_TYPE}, timeout=TIMEOUT_S
            )
            if response.status_code != 200:
                raise PlatformRefusedError(
                    f"the LMS platform {platform} refused to list the line items of "
                    f"{lineitems_url} ({describe_answer(response)})"
                )
            items = response.json()
            for data in items if isinstance(items, list) else []:
                item = _line_item(data)
                if item is not None and item.resource_id == label:
                    return item
            url = response.links.get("next", {}).get("url")
            params = None  # the next link carries its own query
        body = {"label": label, "scoreMaximum": score_maximum, "resourceId": label}
        response = http.post(
            lineitems_url,
            json=body,
            headers={**auth, "Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE},
            timeout=TIMEOUT_S,
        )
    except requests.RequestException as exc:
        raise PlatformRefusedError(
            f"the LMS platform {platform} cannot be reached at {lineitems_url}: {exc}"
        ) from None
    except ValueError:
        raise PlatformRefusedError(
            f"the LMS platform {platform} sent line items that are not JSON"
        ) from None
    created = None
    if response.status_code in (200, 201):
        try:
            created = _line_item(response.json(), created=True)
        except ValueError:
            created = None
    if created is None:
        raise PlatformRefusedError(
            f"the LMS platform {platform} refused to create the line item {label!r} "
            f"({describe_answer(response)})"
        )
    return created


def post_score(http: Any, item: LineItem, token: str, score: dict[str, Any]) -> str:
    """Post one score to ``item``; return ``""`` when accepted, else why not.

    Never raises for a refusal or a network error: the caller reports each
    student's outcome.
    """
    import requests

    try:
        response = http.post(
            scores_url(item.url),
            json=score,
            headers={"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE},
            timeout=TIMEOUT_S,
        )
    except requests.RequestException as exc:
        return f"not sent: the platform cannot be reached ({exc})"
    if 200 <= response.status_code < 300:
        return ""
    return f"refused by the platform ({describe_answer(response)})"
