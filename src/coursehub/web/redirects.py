"""Where a redirect taken from a request may lead: only to a page of this app (pure).

The page to return to after sign-in (``next``) comes from the visitor, so
anyone can craft it. Browsers and servers rewrite URLs before using them:
the WHATWG URL Standard (https://url.spec.whatwg.org/, "basic URL parser")
removes ASCII tab and newline anywhere and C0 controls and spaces at both
ends, treats ``\\`` as ``/`` in http(s) URLs and ``%2e%2e`` as ``..``;
werkzeug drops control characters when it writes a ``Location`` header, or
refuses a newline (a 500). So ``/\\t/evil.example`` became
``//evil.example``, another origin. Rather than guess every rewriting,
:func:`safe_next` accepts only a plain path below the app's prefix and
sends anything else to the home page.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from coursehub.catalog.text import is_forbidden_char

#: Longest ``next`` kept (a browser's practical URL limit is far above; a page of
#: this app needs far less).
MAX_NEXT = 2000
#: Rounds of percent-decoding checked (``%25252f`` is ``/`` after three).
DECODE_ROUNDS = 4


def safe_next(value: object, prefix: str) -> str:
    """Return ``value`` if it is a path of this app, else ``prefix`` (the home page).

    Parameters
    ----------
    value
        The requested target, as it came from the request (any type).
    prefix
        The app's path with a trailing ``/`` (``"/services/coursehub/"``,
        ``"/"`` when standalone); also the page returned for a bad ``value``.

    Returns
    -------
    str
        ``value`` unchanged when: a string of at most :data:`MAX_NEXT`
        printable ASCII characters (no space, no control character, no
        backslash), without scheme or host, whose path starts with ``prefix``
        and, percent-decoded up to :data:`DECODE_ROUNDS` times, still holds
        no backslash, control character, bidirectional control, ``//`` nor
        ``.``/``..`` segment. Else ``prefix``.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_NEXT:
        return prefix
    if any(not "!" <= char <= "~" for char in value) or "\\" in value:
        return prefix
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or value.startswith("//"):
        return prefix
    path = parts.path
    for _ in range(DECODE_ROUNDS):
        if not _plain_path(path, prefix):
            return prefix
        decoded = unquote(path)
        if decoded == path:
            return value
        path = decoded
    return prefix


def _plain_path(path: str, prefix: str) -> bool:
    if not path.startswith(prefix) or "//" in path or "\\" in path:
        return False
    if any(is_forbidden_char(char) or char.isspace() for char in path):
        return False
    return not any(segment in (".", "..") for segment in path.split("/"))


def plan_location(location: str, host: str) -> str:
    """Return a redirect's ``Location`` without scheme and host when it names ``host`` (pure).

    Werkzeug answers a URL missing its trailing slash (``/courses/x``) with a
    308 to an absolute URL built from the request's ``Host`` header, which
    the client chooses: ``Host: evil.example`` gave ``Location:
    http://evil.example/courses/x/``, an open redirect for anyone (a cache,
    a proxy) that keeps the answer. A path alone leads to the same page on
    the host the browser asked. Locations on another host (the hub's sign-in
    page) are returned unchanged.

    ``plan_location("http://evil.example/courses/x/?a=1", "evil.example") == "/courses/x/?a=1"``
    """
    parts = urlsplit(location)
    if not parts.netloc or parts.netloc.lower() != host.lower():
        return location
    path = "/" + parts.path.lstrip("/")  # never "//host": a path of this site
    return (
        path
        + (f"?{parts.query}" if parts.query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )
