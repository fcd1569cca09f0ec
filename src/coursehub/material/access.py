"""Who may read a course's published material: its team and its students, nobody else.

The course's two Unix groups (``cht-<course_id>`` team, ``chs-<course_id>``
students, :func:`coursehub.coursedata.folders.unix_group_name`, made by
``coursehub data ensure``) get read access to ``published/<course_id>.git``
through POSIX ACLs (acl(5)); others get nothing. The same entries are set as
*default* ACLs on every folder of the repository, so that the files a later
update writes (objects, refs) inherit them; git's own ``core.sharedRepository``
is set to ``0640``: after creating a file git chmods it to ``0640`` (folders
``2750``, ``git help config``, "core.sharedRepository"), which keeps the ACL's
mask at ``r--`` (``r-x`` for folders) and others at nothing.

Before the groups exist (no ``coursehub data ensure`` run yet, or a host
without the ``acl`` package where groups are not used) the repository falls
back to the mode it always had: folders ``0755``, files ``0644`` (git's
objects ``0444``),
``core.sharedRepository=0644``: **every account of the host can read it**.
The update says so (:func:`describe_access`); the next update after the
groups are made closes it.

The plan (:func:`plan_published_access`, :func:`render_published_acl`) is pure;
:func:`apply_published_access` runs ``git config`` and ``setfacl`` as the
repository's owner (no root needed).
"""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coursehub.coursedata.folders import unix_group_name
from coursehub.errors import CoursehubError

#: ``core.sharedRepository`` with the course's groups: owner rw, groups (through the ACL) r.
GROUPS_SHARED_REPOSITORY = "0640"
#: ``core.sharedRepository`` without them: every account reads (the fallback).
OPEN_SHARED_REPOSITORY = "0644"
#: Modes of the fallback: folders and files readable by everyone.
OPEN_DIR_MODE, OPEN_FILE_MODE = 0o755, 0o644
#: Most paths given to one ``setfacl`` call.
SETFACL_BATCH = 500


class MaterialAccessError(CoursehubError):
    """The published repository's permissions could not be set (message names course and step)."""


@dataclass(frozen=True)
class PublishedAccess:
    """How a course's published repository is shared.

    Attributes
    ----------
    course_id
        The course.
    groups
        Unix groups that read it (team first); empty in the fallback.
    shared_repository
        git's ``core.sharedRepository`` value.
    """

    course_id: str
    groups: tuple[str, ...]
    shared_repository: str


def group_exists(name: str) -> bool:
    """Return whether ``name`` is a Unix group (``getgrnam``)."""
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def plan_published_access(
    course_id: str, has_group: Callable[[str], bool] = group_exists
) -> PublishedAccess:
    """Return the sharing of ``course_id``'s published repository (pure but for ``has_group``).

    The course's team and students groups that exist are given read access;
    with neither, the fallback (everyone reads). A course id that cannot name
    a Unix group (:func:`~coursehub.coursedata.folders.unix_group_name`
    refuses it) gets the fallback too.
    """
    try:
        names = [unix_group_name(course_id, role) for role in ("team", "students")]
    except CoursehubError:
        names = []
    groups = tuple(name for name in names if has_group(name))
    shared = GROUPS_SHARED_REPOSITORY if groups else OPEN_SHARED_REPOSITORY
    return PublishedAccess(course_id, groups, shared)


def render_published_acl(groups: tuple[str, ...], default: bool = False) -> str:
    """Return the ``setfacl --set`` text for the repository's paths (pure).

    Owner ``rwX``, owning group and others nothing, each of ``groups``
    ``r-X`` (``X``: folders only). ``default=True``: the folders' default
    ACL (``rwx``/``r-x``), inherited by what git creates inside.
    """
    x = "x" if default else "X"
    entries = [f"u::rw{x}", "g::---", *(f"g:{g}:r-{x}" for g in groups), f"m::r-{x}", "o::---"]
    return ",".join(entries)


def describe_access(access: PublishedAccess) -> str:
    """Return who reads the published material, in one phrase (pure)."""
    if access.groups:
        return f"readable by groups {', '.join(access.groups)} only"
    return (
        f"readable by every account of the host (mode {OPEN_DIR_MODE:o}/{OPEN_FILE_MODE:o}): "
        f"no Unix group of {access.course_id} yet, run 'coursehub data ensure'"
    )


def apply_published_access(repo: Path, access: PublishedAccess) -> None:
    """Set ``repo``'s sharing to ``access`` (idempotent, every file inside included).

    Raises
    ------
    MaterialAccessError
        When ``setfacl`` is missing while the groups exist, or a command fails.
    """
    _git_config(repo, access)
    folders = [Path(d) for d, _, _ in os.walk(repo)]
    if access.groups:
        if shutil.which("setfacl") is None:
            raise MaterialAccessError(
                f"course {access.course_id}: setfacl is not installed (Debian: apt-get install "
                "acl), the material cannot be limited to the course's groups"
            )
        _setfacl(["-R", "--set", render_published_acl(access.groups)], [repo], access)
        _setfacl(["-d", "--set", render_published_acl(access.groups, True)], folders, access)
        return
    if shutil.which("setfacl") is not None:
        _setfacl(["-R", "-b"], [repo], access)  # groups removed: drop their entries
    for folder in folders:
        os.chmod(folder, OPEN_DIR_MODE)
        for name in os.listdir(folder):
            path = folder / name
            if path.is_file() and not path.is_symlink():  # git's read-only objects stay 0444
                writable = path.stat().st_mode & 0o200
                os.chmod(path, OPEN_FILE_MODE if writable else OPEN_FILE_MODE & 0o444)


def _git_config(repo: Path, access: PublishedAccess) -> None:
    argv = ["git", "config", "--file", str(repo / "config")]
    _run([*argv, "core.sharedRepository", access.shared_repository], access)


def _setfacl(options: list[str], paths: list[Path], access: PublishedAccess) -> None:
    for start in range(0, len(paths), SETFACL_BATCH):
        batch = [str(p) for p in paths[start : start + SETFACL_BATCH]]
        _run(["setfacl", *options, "--", *batch], access)


def _run(argv: list[str], access: PublishedAccess) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise MaterialAccessError(
            f"course {access.course_id}: {argv[0]} {argv[1]} on the published material failed: "
            f"{detail.strip().splitlines()[-1] if detail.strip() else exc}"
        ) from None
