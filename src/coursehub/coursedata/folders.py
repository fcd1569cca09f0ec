"""A course's data folder on the host: Unix groups from the roster, POSIX ACLs on the folder.

Design: one Unix group for the team (``cht-<course_id>``) and one for the
students (``chs-<course_id>``), refreshed from the catalog's roster; the
folder ``<root>/courses/<course_id>/data`` is owned by ``root:<team group>``,
mode ``2770`` (setgid: new files get the team group), with POSIX ACLs
(acl(5)) granting the students' group ``r-X``, and the same entries as
*default* ACLs so that every file or folder created inside inherits them,
whatever the creator's umask. Others get nothing.

Why groups *and* ACLs: a folder has a single owning group, so "team writes,
students read, others nothing" cannot be said with the mode bits alone; and
ACL entries naming each user would have to be rewritten on every file at
each roster change, where a group entry stays and only the group's member
list (``gpasswd -M``) changes. A running server keeps the supplementary
groups it started with (credentials(7)): a roster change reaches a server at
its next start.

The plan (:func:`plan_course_data`, :func:`unix_group_name`, :func:`render_acl`)
is pure; :func:`apply_course_data` runs ``groupadd``, ``gpasswd`` and
``setfacl`` (package ``acl``) and needs root.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from coursehub.courselayout import course_dir, data_dir
from coursehub.errors import CoursehubError
from coursehub.settings import check_course_id

#: Longest group name Debian's groupadd accepts (shadow-utils, ``GROUP_NAME_MAX_LENGTH``).
MAX_GROUP_NAME = 32
#: Mode of the data folder: owner and team group rwx, setgid, others nothing.
DATA_MODE = 0o2770
#: Mode of ``<root>/courses`` and of each course folder: traverse only.
TRAVERSE_MODE = 0o711
#: Role prefixes of the Unix groups.
GROUP_PREFIXES = {"team": "cht-", "students": "chs-"}


class CourseDataError(CoursehubError):
    """A data folder could not be made: the message names the course and the failing step."""


def unix_group_name(course_id: str, role: str) -> str:
    """Return the Unix group of a course's ``role`` (``"team"`` or ``"students"``) (pure).

    ``cht-<course_id>`` / ``chs-<course_id>``; a name longer than
    :data:`MAX_GROUP_NAME` is cut and ends with 6 hex digits of the course
    id's SHA-256, so that two long ids never share a group.
    """
    check_course_id(course_id)
    name = GROUP_PREFIXES[role] + course_id
    if len(name) <= MAX_GROUP_NAME:
        return name
    digest = hashlib.sha256(course_id.encode()).hexdigest()[:6]
    return f"{name[: MAX_GROUP_NAME - 7]}-{digest}"


def render_acl(team_group: str, students_group: str) -> str:
    """Return the ``setfacl --set`` text of the data folder and its default ACL (pure).

    Access entries: owner and team ``rwx``, students ``r-x``, others nothing;
    the same as default entries (``d:``), inherited by new files (with
    ``X`` semantics: a new regular file is not executable unless created so).
    """
    entries = [
        "u::rwx",
        "g::rwx",
        f"g:{team_group}:rwx",
        f"g:{students_group}:r-x",
        "m::rwx",
        "o::---",
    ]
    return ",".join(entries + [f"d:{e}" for e in entries])


@dataclass(frozen=True)
class CourseDataPlan:
    """What :func:`apply_course_data` makes for one course.

    Attributes
    ----------
    course_id
        The course.
    team_group, students_group
        Unix group names (:func:`unix_group_name`).
    team, students
        Unix accounts to put in each group (sorted; a team member is not
        also listed as a student).
    missing
        Roster usernames with no Unix account (left out, reported).
    """

    course_id: str
    team_group: str
    students_group: str
    team: tuple[str, ...]
    students: tuple[str, ...]
    missing: tuple[str, ...] = field(default=())


def plan_course_data(
    course_id: str,
    team: Iterable[str],
    students: Iterable[str],
    has_account: Callable[[str], bool],
) -> CourseDataPlan:
    """Return the groups and members of a course's data folder (pure but for ``has_account``)."""
    team_set = set(team)
    student_set = set(students) - team_set
    missing = sorted(u for u in team_set | student_set if not has_account(u))
    return CourseDataPlan(
        course_id=course_id,
        team_group=unix_group_name(course_id, "team"),
        students_group=unix_group_name(course_id, "students"),
        team=tuple(sorted(team_set - set(missing))),
        students=tuple(sorted(student_set - set(missing))),
        missing=tuple(missing),
    )


def unix_account_exists(name: str) -> bool:
    """Return whether ``name`` is a Unix account (``getpwnam``)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _run(argv: list[str], course_id: str) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise CourseDataError(
            f"course {course_id}: {argv[0]} is not installed (Debian: apt-get install "
            f"{'acl' if argv[0] == 'setfacl' else 'passwd'})"
        ) from exc
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise CourseDataError(
            f"course {course_id}: {' '.join(argv[:2])} failed: {detail[-1] if detail else exc}"
        ) from exc


def ensure_group(name: str, members: Iterable[str], course_id: str) -> None:
    """Create the Unix group ``name`` if missing and set its member list to ``members``."""
    try:
        grp.getgrnam(name)
    except KeyError:
        _run(["groupadd", name], course_id)
    _run(["gpasswd", "-M", ",".join(members), name], course_id)


def _ensure_dir(path: Path, mode: int) -> None:
    if not path.is_dir():
        path.mkdir(mode=mode)
        os.chmod(path, mode)


def apply_course_data(
    root: str | os.PathLike[str], plan: CourseDataPlan, recursive: bool = False
) -> Path:
    """Make or refresh the groups and the data folder of ``plan``; return the folder (root only).

    Idempotent: groups are created once and get exactly the planned
    members; the folder's owner, mode and ACL are set again each time.
    ``recursive`` also resets the ACL of everything inside (for files moved
    in with ``mv``, which keeps their own permissions).

    Raises
    ------
    CourseDataError
        When not root, or when ``groupadd``, ``gpasswd`` or ``setfacl`` fails
        (the message names the course and the command).
    """
    course_id = plan.course_id
    if os.geteuid() != 0:
        raise CourseDataError(f"course {course_id}: making data folders needs root (Unix groups)")
    if shutil.which("setfacl") is None:
        raise CourseDataError(
            f"course {course_id}: setfacl is not installed (Debian: apt-get install acl)"
        )
    ensure_group(plan.team_group, plan.team, course_id)
    ensure_group(plan.students_group, plan.students, course_id)
    root = Path(root)
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    _ensure_dir(root / "courses", TRAVERSE_MODE)
    _ensure_dir(course_dir(root, course_id), TRAVERSE_MODE)
    folder = data_dir(root, course_id)
    _ensure_dir(folder, DATA_MODE)
    os.chown(folder, 0, grp.getgrnam(plan.team_group).gr_gid)
    os.chmod(folder, DATA_MODE)
    acl = render_acl(plan.team_group, plan.students_group)
    _run(["setfacl", "--set", acl, str(folder)], course_id)
    if recursive:
        files_acl = ",".join(
            e.replace("rwx", "rwX").replace("r-x", "r-X") for e in acl.split(",")[:6]
        )
        for dirpath, dirnames, filenames in os.walk(folder):
            for name in dirnames:
                _run(["setfacl", "--set", acl, os.path.join(dirpath, name)], course_id)
            for name in filenames:
                _run(["setfacl", "--set", files_acl, os.path.join(dirpath, name)], course_id)
    return folder
