"""Who may read a course's grading files: modes of the course directory, and its Unix group.

A course directory holds the solutions (``source/``), every collected
submission (``submitted/``), the autograded copies, the feedback and the
gradebook (every student's grades). Where the spawner gives each student a
Unix account of their own (LocalProcessSpawner, SystemdSpawner), none of it
may be readable or writable by other users. nbgrader itself creates
directories 0o777/0o755 and files 0o644 (its ``collect`` copies the
submission's modes), so after every step :func:`secure_course` sets each
mode again; ``coursehub grading setup`` (and every grading command) also
corrects an older installation.

The teaching team reads its course's files through a Unix group, when
there is one (:func:`resolve_grading_group`): ``COURSEHUB_GRADING_GROUP``
(a group name, ``{course_id}`` is replaced by the course id; ``none``: no
group), else the Unix group ``formgrade-{course_id}`` if it exists (the name
of the hub group of the course's graders). The modes
(:func:`plan_course_modes`, from a table)::

                        with a group              without
    the course directory 0o3770 owner:group       0o700
    nbgrader_config.*   0o640                     0o600
    directories         0o2770 owner:group        0o700
    files               0o660  (0o770 if exec)    0o600 (0o700 if exec)

The set-group-id bit makes new entries inherit the group. The course's
``nbgrader_config.py`` (and ``.json``, :data:`LOCKED_FILES`) is
configuration that every autograde loads, the course app's (root's)
included, so the team (and the course's formgrader account,
:mod:`coursehub.grading.formgrader.account`) may read it but not change it:
the file is not group-writable and the course directory has the sticky bit
(inode(7), ``S_ISVTX``: only a file's owner may rename or remove it), so it
cannot be replaced either. The exchange keeps nbgrader's modes
(:data:`coursehub.grading.layout.EXCHANGE_MODES`).
"""

from __future__ import annotations

import grp
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import UsageError

#: Unix group tried when ``COURSEHUB_GRADING_GROUP`` is unset (the hub group's name).
DEFAULT_GROUP_PATTERN = "formgrade-{course_id}"
#: Prefix of the group of a course's formgrader account (``fg-<hub_id>-<course_id>``,
#: :mod:`coursehub.grading.formgrader.account`), kept on the course directory when the
#: site has no team group.
FORMGRADER_GROUP_PREFIX = "fg-"
#: Values of ``COURSEHUB_GRADING_GROUP`` that mean "no group: owner only".
NO_GROUP = ("none", "-")


#: Files of the course directory's top level that the team reads but never writes: the
#: configuration every nbgrader command there loads (traitlets loads both, ``.py`` and
#: ``.json``; :func:`coursehub.grading.layout.ensure_course` writes the JSON one empty
#: so that nobody else can create it).
LOCKED_FILES = ("nbgrader_config.py", "nbgrader_config.json")


@dataclass(frozen=True)
class CourseModes:
    """Modes of a course directory's entries, and the group (None: owner only).

    ``root_mode``: the course directory itself; ``locked_mode``: the files of
    :data:`LOCKED_FILES` at its top level.
    """

    dir_mode: int
    file_mode: int
    exec_mode: int
    gid: int | None
    root_mode: int = 0o700
    locked_mode: int = 0o600

    def mode_of(self, st_mode: int) -> int:
        """Return the mode an entry with ``st_mode`` must have."""
        if stat.S_ISDIR(st_mode):
            return self.dir_mode
        return self.exec_mode if st_mode & 0o100 else self.file_mode


def plan_course_modes(gid: int | None) -> CourseModes:
    """Return the modes of a course directory with group ``gid`` (None: no group) (pure)."""
    if gid is None:
        return CourseModes(dir_mode=0o700, file_mode=0o600, exec_mode=0o700, gid=None)
    return CourseModes(
        dir_mode=0o2770,
        file_mode=0o660,
        exec_mode=0o770,
        gid=gid,
        root_mode=0o3770,
        locked_mode=0o640,
    )


def resolve_grading_group(course_id: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Return the Unix group name of ``course_id``'s teaching team, or None.

    ``COURSEHUB_GRADING_GROUP`` if set (``{course_id}`` replaced; ``none``,
    ``-`` or empty: None); else ``formgrade-{course_id}`` when that Unix
    group exists, else None.

    Raises
    ------
    UsageError
        If ``COURSEHUB_GRADING_GROUP`` names a Unix group that does not exist.
    """
    env = os.environ if environ is None else environ
    setting = env.get("COURSEHUB_GRADING_GROUP")
    if setting is None:
        name = DEFAULT_GROUP_PATTERN.format(course_id=course_id)
        return name if group_id(name) is not None else None
    setting = setting.strip()
    if setting in ("", *NO_GROUP):
        return None
    name = setting.replace("{course_id}", course_id)
    if group_id(name) is None:
        raise UsageError(
            f"COURSEHUB_GRADING_GROUP: no Unix group {name!r} on this host "
            "(create it, or set COURSEHUB_GRADING_GROUP=none for owner-only files)"
        )
    return name


def group_id(name: str) -> int | None:
    """Return the gid of Unix group ``name``, or None if there is none."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def secure_tree(root: Path, modes: CourseModes) -> None:
    """Give ``root`` and everything under it its mode (and group); symlinks are left alone.

    Raises
    ------
    UsageError
        If a mode or group cannot be set (run as the course's owner or root).
    """
    if not root.exists():
        return
    locked = {root / name for name in LOCKED_FILES}
    try:
        _secure(root, modes, modes.root_mode)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in (*dirnames, *filenames):
                path = Path(dirpath) / name
                _secure(path, modes, modes.locked_mode if path in locked else None)
    except PermissionError as exc:
        raise UsageError(
            f"cannot set the mode of {exc.filename}: {exc.strerror} "
            "(run grading commands as the course directory's owner or as root)"
        ) from exc


def _secure(path: Path, modes: CourseModes, wanted: int | None = None) -> None:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return
    chowned = modes.gid is not None and st.st_gid != modes.gid
    if chowned and modes.gid is not None:
        os.chown(path, -1, modes.gid, follow_symlinks=False)
    wanted = modes.mode_of(st.st_mode) if wanted is None else wanted
    if chowned or stat.S_IMODE(st.st_mode) != wanted:
        # after chown: it may clear the set-group-id bit
        os.chmod(path, wanted, follow_symlinks=False)
