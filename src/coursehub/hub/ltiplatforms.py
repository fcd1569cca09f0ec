"""LTI 1.3 platform registrations for ``coursehub hub config --lti FILE``: read and check them.

A registration is what an LMS administrator gets when registering the hub as
an external tool (Moodle: Site administration > Plugins > Activity modules >
External tool > Manage tools > configure a tool manually, LTI 1.3): the
platform's issuer, the tool's client id, the deployment ids, and the
platform's authorization and key-set (JWKS) URLs. The file is TOML, one
``[[platform]]`` table per registration::

    [[platform]]
    issuer = "https://moodle.univ.example.fr"
    client_ids = ["Xy12AbC"]
    deployment_ids = ["3"]
    authorize_url = "https://moodle.univ.example.fr/mod/lti/auth.php"
    jwks_url = "https://moodle.univ.example.fr/mod/lti/certs.php"
    username_claim = "custom_student_number"    # or "email_local_part" (default)
    student_number_claim = "custom_student_number"   # optional
    token_url = "https://moodle.univ.example.fr/mod/lti/token.php"   # optional: grade passback

:func:`parse_registrations` (pure) turns the text into the list of dicts the
hub's :class:`coursehub.spawn.lti.CoursehubLTIAuthenticator` takes as
``platforms``; :func:`plan_https_warning` (pure) says when the hub's public
address is plain HTTP, where LMS launches cannot work.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from coursehub.errors import UsageError

REQUIRED = ("issuer", "client_ids", "deployment_ids", "authorize_url", "jwks_url")
OPTIONAL = ("username_claim", "student_number_claim")
#: Optional URLs: the platform's OAuth 2.0 token endpoint, for grade passback (LTI AGS).
OPTIONAL_URLS = ("token_url",)
#: ``email_local_part``, ``custom_<name>`` or a top-level claim name.
_CLAIM = re.compile(r"^(email_local_part|custom_[A-Za-z0-9_.-]{1,64}|[A-Za-z_][A-Za-z0-9_]{0,63})$")
#: Hosts allowed over plain http (tests, a platform on the same machine); LTI 1.3
#: requires TLS everywhere else (IMS Security Framework 1.0, section 3).
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _url(value: Any, where: str, key: str) -> str:
    text = str(value).strip() if isinstance(value, str) else ""
    parts = urlsplit(text)
    local = parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
    if not (parts.scheme == "https" or local) or not parts.netloc or parts.fragment:
        raise UsageError(f"{where}: {key} must be an https URL without fragment, got {value!r}")
    return text


def _ids(value: Any, where: str, key: str) -> list[str]:
    items = [value] if isinstance(value, str | int) else value
    if not isinstance(items, list) or not items:
        raise UsageError(f"{where}: {key} must be a non-empty list of strings")
    ids = [str(v).strip() for v in items]
    if any(not v or len(v) > 255 for v in ids):
        raise UsageError(f"{where}: {key} holds an empty or overlong (> 255) value")
    return ids


def parse_registrations(text: str, source: str = "registrations") -> list[dict[str, Any]]:
    """Return the checked registrations of a TOML text (pure).

    Raises
    ------
    UsageError
        Not TOML; no ``[[platform]]``; a missing or unknown key; an issuer or
        URL that is not https (http only for 127.0.0.1/localhost); empty id
        lists; a bad ``username_claim``; the same issuer twice.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{source}: not TOML: {exc}") from None
    entries = data.get("platform")
    extra = sorted(set(data) - {"platform"})
    if extra:
        raise UsageError(f"{source}: unknown table(s) {', '.join(extra)}; use [[platform]]")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{source}: no [[platform]] registration")
    platforms: list[dict[str, Any]] = []
    for n, entry in enumerate(entries, 1):
        where = f"{source}: platform {n}"
        missing = [k for k in REQUIRED if k not in entry]
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL) - set(OPTIONAL_URLS))
        if missing or unknown:
            problems = [f"missing {', '.join(missing)}"] if missing else []
            problems += [f"unknown {', '.join(unknown)}"] if unknown else []
            raise UsageError(f"{where}: {'; '.join(problems)}")
        platform: dict[str, Any] = {
            "issuer": _url(entry["issuer"], where, "issuer"),
            "client_ids": _ids(entry["client_ids"], where, "client_ids"),
            "deployment_ids": _ids(entry["deployment_ids"], where, "deployment_ids"),
            "authorize_url": _url(entry["authorize_url"], where, "authorize_url"),
            "jwks_url": _url(entry["jwks_url"], where, "jwks_url"),
        }
        for key in OPTIONAL:
            value = entry.get(key, "")
            if value and not (isinstance(value, str) and _CLAIM.match(value)):
                raise UsageError(
                    f"{where}: {key} must be email_local_part, custom_<name> or a claim "
                    f"name, got {value!r}"
                )
            platform[key] = value or ("email_local_part" if key == "username_claim" else "")
        for key in OPTIONAL_URLS:
            if entry.get(key):
                platform[key] = _url(entry[key], where, key)
        if any(p["issuer"] == platform["issuer"] for p in platforms):
            raise UsageError(f"{where}: issuer {platform['issuer']} is registered twice")
        platforms.append(platform)
    return platforms


def read_registrations(path: str) -> list[dict[str, Any]]:
    """Return the registrations of the TOML file ``path`` (:func:`parse_registrations`).

    Raises
    ------
    UsageError
        If the file cannot be read, or from :func:`parse_registrations`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--lti {path}: cannot read the registrations: {exc}") from None
    return parse_registrations(text, path)


def plan_https_warning(bind_url: str, public_url: str = "") -> str:
    """Return why LMS launches fail at the hub's public address, or "" when it is HTTPS (pure).

    The public address is ``public_url`` (``c.JupyterHub.public_url``, for TLS
    ending at a proxy in front of the hub), else ``bind_url``. The platform
    sends the launch with a cross-site form POST, which browsers send the
    hub's state cookie with only when it is ``SameSite=None; Secure``, and
    ``Secure`` needs HTTPS (jupyterhub/ltiauthenticator#157;
    :func:`coursehub.spawn.lti.plan_state_cookie`).
    """
    address = public_url or bind_url
    if urlsplit(address).scheme == "https":
        return ""
    return (
        f"LMS launches need the hub served over HTTPS, and its public address {address} is "
        "plain HTTP: browsers keep the launch's state cookie back and the launch ends on a 400 "
        "page; use an https --bind-url with c.JupyterHub.ssl_cert, or TLS at a proxy in front "
        "with --public-url https://HUB/ (docs/lti.md)"
    )
