"""The terms of a mirror update: what it mirrors, what it returns, what it raises.

Shared by :mod:`coursehub.material.mirror` (the update), its fetch
(:mod:`coursehub.material.fetch`) and its publishing
(:mod:`coursehub.material.publish`).
"""

from __future__ import annotations

from dataclasses import dataclass

from coursehub.errors import CoursehubError


class MaterialError(CoursehubError):
    """An update that failed; the message says why and that the last good material stays."""


class UpdateRunningError(CoursehubError):
    """Another update of the same course holds its lock."""


@dataclass(frozen=True)
class MirrorSource:
    """What to mirror: the course, the teacher's repository, branch and folder, credential kind."""

    course_id: str
    url: str
    branch: str
    subdir: str
    credential: str = ""


@dataclass(frozen=True)
class MirrorResult:
    """A good update: the teacher's ``commit``, the ``published`` commit, its ``pull_url``,
    who may read it (``access``, :func:`coursehub.material.access.describe_access`) and
    what the teacher should know (``note``: the history was not checked)."""

    commit: str
    published: str
    pull_url: str
    changed: bool
    access: str = ""
    note: str = ""


def still_served(reason: str) -> str:
    """Return ``reason`` saying that the last good material is still served."""
    return f"{reason}; the last good material is still served"
