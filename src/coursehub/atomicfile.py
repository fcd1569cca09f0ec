"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file coursehub writes for somebody else to read (configuration,
reports, checkpoints, datasets, grades, secrets) goes through this module.
The recipe is the one POSIX guarantees (``rename(2)``: "If newpath already
exists, it will be atomically replaced"):

1. create a temporary file in the destination's own folder (a rename is only
   atomic within one file system), named ``.<name>.<random>.tmp``, with
   mode 0o600 (``tempfile.mkstemp``) so nobody reads it half-written;
2. write it, then ``fsync`` it, so that after a crash the new name never
   points at a file whose data did not reach the disk;
3. give it its final mode explicitly (``os.chmod``: a process's umask must not
   decide whether grades or tokens are readable by others);
4. ``os.replace`` it onto the destination (or ``os.link`` it, which fails if
   the destination exists, when the caller must not clobber one), then
   ``fsync`` the folder so that the rename itself is durable;
5. on any error, remove the temporary file and let the error propagate.

The module imports only the standard library, so that any package may use it.

Public API: :func:`write_atomically`, :func:`atomic_path`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: Mode of a file written without an explicit one: owner writes, everybody reads.
DEFAULT_MODE = 0o644


def write_atomically(
    path: str | os.PathLike[str],
    data: str | bytes,
    mode: int | None = DEFAULT_MODE,
    *,
    replace: bool = True,
    encoding: str = "utf-8",
) -> Path:
    """Write ``data`` to ``path`` atomically, with permission bits ``mode``; return ``path``.

    Parameters
    ----------
    path : path-like
        Destination; missing parent folders are created (with the umask).
    data : str or bytes
        The whole content. Text is encoded with ``encoding`` and written as
        is: no newline translation (``"\\r\\n"`` in a CSV stays ``"\\r\\n"``).
    mode : int or None
        Final permission bits, e.g. ``0o644`` (default) or ``0o600`` for a
        private file (grades, logs, secrets). ``None``: ``0o666`` less the
        process's umask, the mode ``open()`` would give a new file (for
        files a user makes in their own folders: datasets, checkpoints).
    replace : bool
        Replace an existing ``path`` (default). With ``False``, raise
        :class:`FileExistsError` instead and leave it untouched.
    encoding : str
        Encoding of text ``data``.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    OSError
        If the folder or file cannot be written; no temporary file is left.
    FileExistsError
        If ``path`` exists and ``replace`` is false.
    """
    raw = data.encode(encoding) if isinstance(data, str) else data
    with atomic_path(path, mode, replace=replace) as tmp, open(tmp, "wb") as handle:
        handle.write(raw)
    return Path(path)


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str], mode: int | None = DEFAULT_MODE, *, replace: bool = True
) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; publish it as ``path`` if the block succeeds.

    For writers that want a file name or an open file of their own
    (``torch.save``, ``np.savez``, ``Figure.savefig``)::

        with atomic_path(model_file) as tmp:
            torch.save(checkpoint, tmp)

    The temporary file exists (empty, mode 0o600) when the block starts and
    its name ends in ``.tmp``: give writers that choose a format from the
    suffix the format explicitly (``savefig(tmp, format="png")``) or an open
    file (``np.savez`` appends ``.npz`` to a name without it). The block
    must write to that path, not move another file onto it.

    Parameters
    ----------
    path : path-like
        Destination; missing parent folders are created.
    mode : int or None
        Final permission bits, as for :func:`write_atomically`.
    replace : bool
        As for :func:`write_atomically`.

    Yields
    ------
    Path
        The temporary file to write.

    Raises
    ------
    OSError
        If the folder or file cannot be written (``NotADirectoryError`` if
        a file stands where a folder should be); the temporary file is
        removed, whatever the block raised.
    FileExistsError
        If ``path`` exists and ``replace`` is false, and only then.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where a folder should be: not "destination exists"
        message = os.strerror(errno.ENOTDIR)
        raise NotADirectoryError(errno.ENOTDIR, message, str(path.parent)) from None
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        _sync_file(tmp)
        os.chmod(tmp, _umask_mode() if mode is None else mode)
        _publish(tmp, path, replace)
        _sync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _publish(tmp: Path, path: Path, replace: bool) -> None:
    """Move the finished ``tmp`` onto ``path``; unless ``replace``, never clobber ``path``."""
    if replace:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, and fails if ``path`` exists
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links (FAT, some FUSE mounts)
        if path.exists():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path)) from None
        os.replace(tmp, path)


def _sync_file(path: Path) -> None:
    """Flush ``path``'s data to the disk (``fsync(2)``; a read-only descriptor does on Linux)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (``fsync`` on the folder); skipped where unsupported."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _umask_mode() -> int:
    """Return ``0o666`` less the process's umask, read without changing it where Linux allows.

    ``/proc/self/status`` has a ``Umask:`` line since Linux 4.7
    (Documentation/filesystems/proc.rst); elsewhere the umask is read by
    setting and restoring it, which is not safe against other threads
    creating files at that instant.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
