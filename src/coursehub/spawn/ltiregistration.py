"""The LMS registrations the hub's LTI sign-in accepts, and what a launch of one posts (pure).

Each registration is one entry of
:attr:`coursehub.spawn.lti.CoursehubLTIAuthenticator.platforms`, rendered by
``coursehub hub config --lti`` (:mod:`coursehub.hub.ltiplatforms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tornado.web import HTTPError

#: Username claims the course app understands (``coursehub.catalog.lti.claims``).
DEFAULT_USERNAME_CLAIM = "email_local_part"


@dataclass(frozen=True)
class Platform:
    """One LMS registration: what the platform gave the tool when it was registered."""

    issuer: str
    client_ids: tuple[str, ...]
    deployment_ids: tuple[str, ...]
    authorize_url: str
    jwks_url: str
    username_claim: str = DEFAULT_USERNAME_CLAIM
    student_number_claim: str = ""
    token_url: str = ""


def parse_platform(entry: dict[str, Any]) -> Platform:
    """Return the :class:`Platform` of one ``platforms`` entry (pure).

    Raises
    ------
    ValueError
        A missing issuer, client id, deployment id or URL (the hub refuses to start).
    """
    missing = [
        key
        for key in ("issuer", "client_ids", "deployment_ids", "authorize_url", "jwks_url")
        if not entry.get(key)
    ]
    if missing:
        raise ValueError(f"LTI platform {entry.get('issuer')!r}: missing {', '.join(missing)}")
    return Platform(
        issuer=str(entry["issuer"]),
        client_ids=tuple(str(c) for c in entry["client_ids"]),
        deployment_ids=tuple(str(d) for d in entry["deployment_ids"]),
        authorize_url=str(entry["authorize_url"]),
        jwks_url=str(entry["jwks_url"]),
        username_claim=str(entry.get("username_claim") or DEFAULT_USERNAME_CLAIM),
        student_number_claim=str(entry.get("student_number_claim") or ""),
        token_url=str(entry.get("token_url") or ""),
    )


def find_platform(
    platforms: list[Platform] | tuple[Platform, ...], issuer: str, client_id: str | None = None
) -> Platform | None:
    """Return the registration of ``issuer`` (and ``client_id`` when given), or None (pure)."""
    for platform in platforms:
        if platform.issuer == issuer and (not client_id or client_id in platform.client_ids):
            return platform
    return None


def unknown_platform(issuer: str) -> HTTPError:
    """The refusal of a launch from an unregistered platform."""
    return HTTPError(
        400,
        f"this hub has no LTI registration for the platform {issuer[:200]!r}: ask the hub "
        "admin to register it (coursehub hub config --lti)",
    )


def launch_body(
    platform: Platform, claims: dict[str, Any], hub_admins: list[str] | tuple[str, ...] = ()
) -> dict[str, Any]:
    """Return what the hub posts to the course app for a verified launch (pure): the
    registration's issuer, claim names and token URL (grade passback), the hub's admin
    usernames, and every claim."""
    return {
        "issuer": platform.issuer,
        "username_claim": platform.username_claim,
        "student_number_claim": platform.student_number_claim,
        "token_url": platform.token_url,
        "hub_admins": sorted(hub_admins),
        "claims": claims,
    }
