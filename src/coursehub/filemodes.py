"""Private files and directories: create them with a mode, and correct the mode of old ones.

Files holding students' names, e-mails, submissions or grades (the catalog,
the hub's database, gradebooks, course directories) must never be readable
or writable by other Unix users: on a host where each student's server runs
as its own Unix account (LocalProcessSpawner, SystemdSpawner) any student
could otherwise read them. A process creates files with its umask (typically
0o022, i.e. world-readable), SQLite included, so these helpers set modes
explicitly, at creation and again on every start (an upgrade corrects an old
installation).

SQLite creates a database's ``-wal``, ``-shm`` and ``-journal`` files with
the permissions of the database file (``robust_open`` /
``findCreateFileMode`` in SQLite's ``os_unix.c``), so making the database
file private before the first connection keeps them private too;
:func:`ensure_private_sqlite` also corrects ones left by an older version.

Public API: :func:`ensure_private_file`, :func:`ensure_private_dir`,
:func:`ensure_private_sqlite`, :func:`private_umask`.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coursehub.errors import CoursehubError

log = logging.getLogger(__name__)

#: Suffixes of the files SQLite keeps next to a database (WAL mode and rollback journal).
SQLITE_SIDE_FILES: tuple[str, ...] = ("-wal", "-shm", "-journal")


def _correct(path: Path, mode: int, gid: int | None) -> None:
    """Give ``path`` exactly ``mode`` (and group ``gid``), without following a symlink."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        raise CoursehubError(f"{path} is a symbolic link; expected a private file or directory")
    try:
        if gid is not None and st.st_gid != gid:
            os.chown(path, -1, gid, follow_symlinks=False)
        if stat.S_IMODE(st.st_mode) != mode:
            os.chmod(path, mode, follow_symlinks=False)
    except PermissionError as exc:
        if st.st_uid != os.geteuid() and not stat.S_IMODE(st.st_mode) & 0o007:
            return  # not ours, and not open to others: its owner corrects it
        raise CoursehubError(
            f"cannot make {path} private (mode {mode:o}): {exc.strerror}; "
            f"run this as its owner (uid {st.st_uid}) or as root"
        ) from exc


def ensure_private_file(path: str | Path, mode: int = 0o600, gid: int | None = None) -> Path:
    """Create ``path`` (empty) if missing, then give it exactly ``mode`` (and group ``gid``).

    Parameters
    ----------
    path
        The file; its directory must exist.
    mode
        Permission bits, e.g. ``0o600`` (owner only) or ``0o660`` (owner and
        group). Never world bits for private data.
    gid
        Unix group to give the file (``None``: leave it).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    CoursehubError
        If ``path`` is a symbolic link, or its mode cannot be corrected and
        other users can read or write it.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        pass
    else:
        os.close(fd)
    _correct(path, mode, gid)
    return path


def ensure_private_dir(path: str | Path, mode: int = 0o700, gid: int | None = None) -> Path:
    """Create directory ``path`` (and missing parents, left to the umask) and give it ``mode``.

    ``mode`` may hold the set-group-id bit (``0o2770``: new entries get the
    directory's group). Raises :class:`CoursehubError` as
    :func:`ensure_private_file` does.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    _correct(path, mode, gid)
    return path


def ensure_private_sqlite(path: str | Path, mode: int = 0o600, gid: int | None = None) -> Path:
    """Make an SQLite database file private, creating it empty if missing, and its side files.

    An empty file is a valid empty SQLite database. Existing ``-wal``,
    ``-shm`` and ``-journal`` files (:data:`SQLITE_SIDE_FILES`) get ``mode``
    too. Call it before the first connection and again after one.
    """
    path = Path(path)
    ensure_private_file(path, mode, gid)
    for suffix in SQLITE_SIDE_FILES:
        side = path.with_name(path.name + suffix)
        try:
            _correct(side, mode, gid)
        except FileNotFoundError:
            continue
    return path


@contextmanager
def private_umask(mask: int = 0o077) -> Iterator[None]:
    """Run the block with umask ``mask`` (default: nothing for group and others), then restore it.

    The umask is process-wide: use it in command-line processes, not in a
    threaded web server.
    """
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)
