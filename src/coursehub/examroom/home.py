"""Exam homes: one fresh folder per exam and student, the exam's notebooks fetched into it.

Layout (``root`` is the site's exam folder, ``/srv/coursehub/exams`` by
default)::

    root/                           root, 0711
      <course_id>/<assignment>/     root, 0711
        <student>/                  the student, 0700: the exam home
          <course_id>/<assignment>/ the released files, as nbgrader's fetch leaves them

The student's course home, course material and other work are elsewhere and
the exam server does not start in them. The inner
``<course_id>/<assignment>/`` is what nbgrader's fetch writes with
``Exchange.path_includes_course`` (nbgrader's exchange documentation), so the
bell takes the home as it takes any work folder
(``coursehub exam bell ... --work-dir '<root>/<course_id>/<assignment>/{student}'``).

The released files come from the course's exchange
(``<exchange root>/<course_id>/outbound/<assignment>``, nbgrader's layout);
they are copied once, when the home is made: a server started again (a
crash, another computer) finds the student's work as they left it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from coursehub.errors import UsageError

#: The site's exam folder, when none is configured.
DEFAULT_EXAM_ROOT = "/srv/coursehub/exams"
#: The site's autosave store (:mod:`coursehub.grading.examsnapshot`), when none is given.
DEFAULT_STORE = "/srv/coursehub/exam-snapshots"
#: Mode of the folders above the exam homes (others pass through, never list).
PASS_MODE = 0o711
#: Mode of an exam home.
HOME_MODE = 0o700


def check_part(what: str, value: str) -> str:
    """Return ``value`` if it can be one folder name, else raise naming ``what``.

    Raises
    ------
    UsageError
        Empty, ``.``/``..``, or holding ``/`` or a NUL byte.
    """
    if not value or value in (".", "..") or "/" in value or "\0" in value:
        raise UsageError(f"{what}: {value!r} cannot be a folder name")
    return value


def plan_exam_home(
    root: str | os.PathLike[str], course_id: str, assignment: str, student: str
) -> Path:
    """Return ``root/<course_id>/<assignment>/<student>`` (pure; each part checked)."""
    return (
        Path(root)
        / check_part("course_id", course_id)
        / check_part("assignment", assignment)
        / check_part("student", student)
    )


def release_dir(exchange_root: str | os.PathLike[str], course_id: str, assignment: str) -> Path:
    """Return nbgrader's released folder: ``<exchange_root>/<course_id>/outbound/<assignment>``."""
    return Path(exchange_root) / course_id / "outbound" / assignment


def ensure_exam_home(
    home: Path, uid: int, gid: int, release: Path, course_id: str, assignment: str
) -> Path:
    """Make the exam ``home`` (owned by ``uid:gid``, 0700) and fetch ``release`` into it once.

    Returns the folder of the fetched files, ``home/<course_id>/<assignment>``.
    The folders above ``home`` are made root's, 0711, when run as root.

    Raises
    ------
    UsageError
        ``release`` is missing (the exam's assignment is not released).
    """
    target = home / course_id / assignment
    if target.is_dir():
        return target
    if not release.is_dir():
        raise UsageError(f"{course_id}/{assignment}: not released (no folder {release})")
    for folder in reversed(home.parents[:2]):
        folder.mkdir(mode=PASS_MODE, parents=True, exist_ok=True)
        os.chmod(folder, PASS_MODE)
    home.mkdir(mode=HOME_MODE, exist_ok=True)
    staging = home / f".{assignment}.fetching"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(release, staging, symlinks=False)
    target.parent.mkdir(exist_ok=True)
    os.rename(staging, target)
    for folder in (home, target.parent):
        os.chown(folder, uid, gid)
        os.chmod(folder, HOME_MODE)
    for dirpath, _dirnames, filenames in os.walk(target):
        os.chown(dirpath, uid, gid)
        for name in filenames:
            os.chown(os.path.join(dirpath, name), uid, gid)
    return target
