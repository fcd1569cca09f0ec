"""The demo's data directory is private: modes set on creation, corrected at each start.

The data directory holds students' names, e-mails and grades (catalog,
gradebooks), the hub's database and log, and the demo's secrets. Every
process of the demo runs as one Unix user, so nothing there needs to be
readable by anyone else: the demo runs under umask :data:`DEMO_UMASK` (new
files 0600, directories 0700) and, at each start, :func:`ensure_private_data`
sets the modes of :data:`DATA_MODES` on what a previous version created with
wider ones. SQLite creates ``-wal``, ``-shm`` and ``-journal`` files with
the mode of their database (https://www.sqlite.org/tempfiles.html, "unix
VFS": ``findCreateFileMode``); they are listed anyway, for databases opened
by an older version. The course directories (gradebooks included) are left
to :func:`coursehub.grading.layout.secure_course`, which each start runs
next: their modes let the course's formgrader account in through the
course's group (:mod:`coursehub.grading.perms`), never anyone else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: umask of the demo and everything it starts (group and others get nothing).
DEMO_UMASK = 0o077
_SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")

#: Glob pattern relative to the data directory -> mode ("." is the directory itself).
DATA_MODES: dict[str, int] = {
    ".": 0o700,
    **{f"catalog.sqlite{s}": 0o600 for s in _SQLITE_SUFFIXES},
    **{f"jupyterhub.sqlite{s}": 0o600 for s in _SQLITE_SUFFIXES},
    "jupyterhub_cookie_secret": 0o600,
    "demo-secrets.json": 0o600,
    "demo.lock": 0o600,
    "coursehub-gpus.json": 0o600,
    "hub": 0o700,
    "hub/jupyterhub.log": 0o600,
    "hub/jupyterhub_config.py": 0o600,
    "homes": 0o700,
    "nbgrader": 0o700,
}


def plan_mode_fixes(
    found: Mapping[str, int], table: Mapping[str, int] = DATA_MODES
) -> list[tuple[str, int]]:
    """Return ``(path, mode)`` to apply, for each found path whose mode is not its table's.

    Parameters
    ----------
    found : mapping
        Path relative to the data directory -> its current permission bits
        (``st_mode & 0o7777``).
    table : mapping
        Glob pattern -> mode; the first pattern matching a path
        (``fnmatch.fnmatchcase``) gives its mode, paths matching none are left.
    """
    from fnmatch import fnmatchcase

    fixes = []
    for path, mode in sorted(found.items()):
        wanted = next((m for pattern, m in table.items() if fnmatchcase(path, pattern)), None)
        if wanted is not None and mode != wanted:
            fixes.append((path, wanted))
    return fixes


def ensure_private_data(data_dir: Path) -> list[tuple[str, int]]:
    """Set the modes of :data:`DATA_MODES` under ``data_dir``; return the fixes made.

    Symbolic links are not followed (``lstat``; a link is left alone).
    """
    found: dict[str, int] = {}
    for pattern in DATA_MODES:
        for path in [data_dir] if pattern == "." else data_dir.glob(pattern):
            st = path.lstat()
            if not path.is_symlink():
                found["." if path == data_dir else path.relative_to(data_dir).as_posix()] = (
                    st.st_mode & 0o7777
                )
    fixes = plan_mode_fixes(found)
    for rel, mode in fixes:
        os.chmod(data_dir / rel, mode)
    return fixes


#: What the demo puts in each course's shared data folder.
DATA_README = (
    "# Shared data of the course\n\n"
    "The teaching team writes here; the course's students read. On a real host,\n"
    "`coursehub data ensure COURSE_ID` gives the team and the students their own\n"
    "Unix groups (docs/course-data.md); in the demo every account is one Unix user.\n"
)


def ensure_course_data(shared_root: Path, course_ids: list[str]) -> list[Path]:
    """Make each course's data folder under the demo's shared root; return them.

    The folders (``<shared_root>/courses/<course_id>/data``, private like
    the rest of the data directory: every demo account is the demo's Unix
    user) get a ``README.md`` once, so a server's ``~/<course_id>-data``
    link leads somewhere from the first start.
    """
    from coursehub.courselayout import data_dir

    made = []
    for course_id in course_ids:
        folder = data_dir(shared_root, course_id)
        folder.mkdir(parents=True, exist_ok=True)
        readme = folder / "README.md"
        if not readme.exists():
            readme.write_text(DATA_README, encoding="utf-8")
        made.append(folder)
    return made
