"""A course's material in the catalog: checks of a repository's address, and the mirror's state.

The repository (``git_url``, ``branch``, ``subpath``) and the state of its
mirror live on :class:`~coursehub.catalog.models.courses.CourseMaterial`:
``state`` (:data:`NEW`, :data:`UPDATING`, :data:`OK`, :data:`ERROR`),
``commit`` (the upstream commit of the last good update), ``source``
(the repository, branch and folder it came from), ``pull_url`` (where the
students pull from), ``error`` (the last failure, "" after a success) and
the times of the last request, attempt and good update. ``credential``
holds only the credential's kind (``""``, ``"token"``, ``"deploy-key"``):
the secret is a private file of the course app's host
(:mod:`coursehub.material.credential`), never a database value.

A repository URL never carries a secret: ``https://user:token@host/...``
(or a token as the user name) is refused with a message that says to pass
the token as a credential file. Only the transports git can use without
running a program of the URL's choosing are accepted (``https``, ``http``,
``ssh`` and scp-like ``user@host:path``), never ``file://``, a local path or
``ext::`` (git's "GIT URLS" and ``GIT_ALLOW_PROTOCOL`` in ``git help git``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from coursehub.catalog.errors import ValidationError
from coursehub.catalog.models.base import utcnow
from coursehub.catalog.models.courses import Course, CourseMaterial

NEW, UPDATING, OK, ERROR = "new", "updating", "ok", "error"
#: Branch of the published (students') repository: append-only, whatever the upstream branch.
PUBLISHED_BRANCH = "main"
#: Schemes of ``scheme://`` URLs accepted for a course repository.
URL_SCHEMES = ("https", "http", "ssh")
_SCP_LIKE = re.compile(r"^(?P<user>[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/\\].*)$")
_BRANCH = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._/-]{0,199}$")
_FOLDER_PART = re.compile(r"^[^\x00-\x1f\\]+$")


def check_repo_url(url: str) -> str:
    """Return the stripped repository ``url``; refuse one git should not fetch for a teacher.

    Raises
    ------
    ValidationError
        Empty, too long (500 characters), with spaces or control characters,
        a secret in it (``user:password@`` or any user name in an ``http(s)``
        URL), a scheme other than :data:`URL_SCHEMES`, or a local path.
    """
    url = url.strip()
    if not url:
        raise ValidationError("the repository URL is empty")
    if len(url) > 500 or re.search(r"[\s\x00-\x1f\x7f]", url):
        raise ValidationError("the repository URL must be one line of at most 500 characters")
    if url.startswith("-"):
        raise ValidationError(f"the repository URL {url[:40]!r} must not start with '-'")
    if "://" not in url:
        match = _SCP_LIKE.match(url)
        if match is None or "::" in url:
            raise ValidationError(
                f"the repository URL {url!r} is not https://, http://, ssh:// or user@host:path"
            )
        return url
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in URL_SCHEMES:
        raise ValidationError(
            f"the repository URL scheme {scheme!r} is not allowed: use {', '.join(URL_SCHEMES)}"
        )
    if not parts.hostname:
        raise ValidationError(f"the repository URL {url!r} names no host")
    if parts.password is not None or (scheme != "ssh" and parts.username is not None):
        raise ValidationError(
            "the repository URL holds a user name or token: remove it from the URL and give "
            "the token as a credential file (coursehub material set ... --credential FILE)"
        )
    return url


def check_branch(branch: str) -> str:
    """Return the stripped branch name (default ``"main"``).

    Raises
    ------
    ValidationError
        If it is not a plain branch name (``git check-ref-format --branch``'s
        rules, restricted to letters, digits, ``.``, ``_``, ``-`` and ``/``).
    """
    branch = branch.strip() or "main"
    if (
        not _BRANCH.match(branch)
        or ".." in branch
        or "//" in branch
        or branch.endswith(("/", ".", ".lock"))
        or "/." in branch
    ):
        raise ValidationError(
            f"branch {branch!r} is not a valid branch name (letters, digits, '.', '_', '-', '/')"
        )
    return branch


def check_subdir(subdir: str) -> str:
    """Return the folder inside the repository, without leading or trailing ``/`` ("" = all).

    Raises
    ------
    ValidationError
        If it climbs out of the repository (``..``), names ``.git``, or holds
        control characters or backslashes.
    """
    subdir = subdir.strip().strip("/")
    if not subdir:
        return ""
    parts = subdir.split("/")
    for part in parts:
        if part in ("", ".", "..", ".git") or not _FOLDER_PART.match(part):
            raise ValidationError(
                f"folder {subdir!r} must be a relative path inside the repository "
                "(no '..', '.git', empty parts or control characters)"
            )
    return "/".join(parts)


def plan_source(git_url: str, branch: str, subpath: str) -> str:
    """The ``source`` key of a material: the repository, branch and folder, one string."""
    return f"{git_url} {branch} {subpath}".rstrip()


def material_properties(course_id: str, material: CourseMaterial | None) -> dict[str, str] | None:
    """Return the hub group property ``material`` of a course, None before a first good update.

    The dictionary holds what a student's server needs to pull with
    nbgitpuller: ``repo`` (the published mirror, no credential), ``branch``
    and ``target`` (the folder in the student's home,
    :func:`target_folder`). Read by :mod:`coursehub.spawn.material`.
    """
    if material is None or not material.pull_url:
        return None
    return {
        "repo": material.pull_url,
        "branch": PUBLISHED_BRANCH,
        "target": target_folder(course_id),
    }


def render_pull_link(hub_base_url: str, course: Course, notebook: str = "") -> str | None:
    """nbgitpuller's link that pulls the course's material into one's server, None before a
    first good update: ``{hub_base_url}hub/user-redirect/git-pull?repo=...&branch=...
    &targetpath=...&urlpath=lab/tree/...`` (JupyterHub's ``user-redirect``; nbgitpuller's
    ``handlers.py`` parameters; the same link as :func:`coursehub.spawn.material.render_pull_path`).

    ``notebook`` (a path in the published folder, already checked, e.g. by
    :func:`coursehub.catalog.lti.claims.plan_notebook`) opens that notebook
    rather than the folder: an LMS deep link.
    """
    props = material_properties(course.course_id, course.material)
    if props is None:
        return None
    opened = "/".join(p for p in (props["target"], notebook) if p)
    query = urlencode(
        {
            "repo": props["repo"],
            "branch": props["branch"],
            "targetpath": props["target"],
            "urlpath": "lab/tree/" + quote(opened),
        }
    )
    return f"{hub_base_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def target_folder(course_id: str) -> str:
    """The folder of a student's home the material is pulled into: ``<course_id>-material``."""
    return f"{course_id}-material"


def mark_requested(material: CourseMaterial, at: datetime | None = None) -> None:
    """Record that an update was asked for (state :data:`UPDATING`)."""
    material.state = UPDATING
    material.requested_at = at or utcnow()


def record_success(
    material: CourseMaterial, commit: str, pull_url: str, at: datetime | None = None
) -> None:
    """Record a good update: ``commit`` published at ``pull_url``; the error is cleared."""
    when = at or utcnow()
    material.state = OK
    material.commit = commit
    material.source = plan_source(material.git_url, material.branch, material.subpath)
    material.pull_url = pull_url
    material.error = ""
    material.last_attempt_at = when
    material.last_update_at = when


def record_failure(material: CourseMaterial, error: str, at: datetime | None = None) -> None:
    """Record a failed update; the last good commit and pull URL stay (still served)."""
    material.state = ERROR
    material.error = error[:2000]
    material.last_attempt_at = at or utcnow()


#: Keys of :func:`render_state` for the course's team only: where the material comes from
#: (the upstream URL may name a private or internal host) and why its last update failed.
TEAM_ONLY_KEYS = ("repo", "branch", "subdir", "credential", "error")


def render_state(course: Course, team: bool = True) -> dict[str, Any]:
    """The material of ``course`` as JSON-ready values (no secret: the credential's kind only).

    ``team``: the reader is on the course's team (or an admin); for anyone
    else the :data:`TEAM_ONLY_KEYS` are left out.
    """
    m = course.material
    if m is None:
        return {"course_id": course.course_id, "repo": None, "state": NEW}

    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    state = {
        "course_id": course.course_id,
        "repo": m.git_url,
        "branch": m.branch,
        "subdir": m.subpath,
        "credential": m.credential or None,
        "state": m.state,
        "commit": m.commit or None,
        "error": m.error or None,
        "pull_url": m.pull_url or None,
        "target": target_folder(course.course_id),
        "requested_at": when(m.requested_at),
        "last_attempt_at": when(m.last_attempt_at),
        "last_update_at": when(m.last_update_at),
    }
    if not team:
        for key in TEAM_ONLY_KEYS:
            del state[key]
    return state
