"""Write a backup: every part into one tar archive, with its manifest (:mod:`.manifest`).

The archive is written beside its final name (``.<name>.partial-XXXX``, mode
0600: it holds secrets), flushed to disk (``fsync``) and renamed into place,
so that a backup cut short never leaves a file that looks whole. Files are
read once, hashed (:mod:`hashlib`, SHA-256) as :mod:`tarfile` copies them.
"""

from __future__ import annotations

import grp
import hashlib
import io
import json
import os
import pwd
import socket
import stat
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from coursehub.backup.databases import copy_sqlite, dump_postgresql, is_sqlite_file
from coursehub.backup.manifest import (
    DATA,
    HEADER_NAME,
    MANIFEST_NAME,
    MANIFEST_SUM_NAME,
    ArchiveError,
    Entry,
    Manifest,
    Part,
    sha256_hex,
)
from coursehub.backup.sources import Source
from coursehub.errors import UsageError

#: Files next to a SQLite database that its copy already holds (SQLite, "Temporary Files").
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
#: gzip level of a ``.gz`` archive: 6, gzip's own default, fast enough for gradebooks.
GZIP_LEVEL = 6


@dataclass(frozen=True)
class BackupSummary:
    """What :func:`write_backup` wrote.

    Attributes
    ----------
    path : pathlib.Path
        The archive.
    size : int
        Its size in bytes.
    files : int
        Members of type file (databases included).
    data_bytes : int
        Their total size in bytes, before compression.
    parts : tuple of Part
        The parts backed up.
    skipped : tuple of (str, str)
        The parts not found here: (name, reason).
    seconds : float
        Wall time of the backup.
    """

    path: Path
    size: int
    files: int
    data_bytes: int
    parts: tuple[Part, ...]
    skipped: tuple[tuple[str, str], ...]
    seconds: float


class _HashingReader(io.RawIOBase):
    """A file read through :mod:`tarfile`, hashed as it goes."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self.stream = stream
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.digest.update(data)
        return data


def _names(st: os.stat_result) -> tuple[str, str]:
    try:
        user = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        user = ""
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = ""
    return user, group


def default_archive_name(now: datetime) -> str:
    """``coursehub-backup-<UTC date and time>.tar.gz``, e.g. ``...-20261204T203000Z.tar.gz``."""
    return f"coursehub-backup-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}.tar.gz"


class _Writer:
    """The archive being written: its tar stream, its entries, a folder for database copies."""

    def __init__(self, tar: tarfile.TarFile, workdir: Path) -> None:
        self.tar = tar
        self.workdir = workdir
        self.entries: list[Entry] = []

    def _info(self, name: str, kind: bytes, st: os.stat_result) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.mode = stat.S_IMODE(st.st_mode)
        info.uid, info.gid = st.st_uid, st.st_gid
        info.uname, info.gname = _names(st)
        info.mtime = int(st.st_mtime)
        return info

    def _entry(self, info: tarfile.TarInfo, kind: str, **extra: object) -> None:
        self.entries.append(
            Entry(info.name, kind, info.mode, info.uid, info.gid, info.uname, info.gname, **extra)  # type: ignore[arg-type]
        )

    def add_file(self, name: str, path: Path, st: os.stat_result | None = None) -> None:
        """Add the regular file ``path`` as ``name`` (``st``: the stat of its owner and mode)."""
        with path.open("rb") as stream:
            own = os.fstat(stream.fileno())
            info = self._info(name, tarfile.REGTYPE, st or own)
            info.size = own.st_size
            reader = _HashingReader(stream)
            try:
                self.tar.addfile(info, reader)
            except OSError as exc:
                raise ArchiveError(f"{path} changed while it was read: back up again") from exc
        self._entry(info, "file", size=info.size, sha256=reader.digest.hexdigest())

    def add_database(self, name: str, path: Path) -> None:
        """Add a consistent copy of the SQLite database ``path`` (its mode and owner kept)."""
        st = path.stat()
        copy = Path(tempfile.mkstemp(dir=self.workdir)[1])
        copy.unlink()
        copy_sqlite(path, copy)
        try:
            self.add_file(name, copy, st)
        finally:
            copy.unlink()

    def add_dir(self, name: str, st: os.stat_result) -> None:
        info = self._info(name, tarfile.DIRTYPE, st)
        self.tar.addfile(info)
        self._entry(info, "dir")

    def add_symlink(self, name: str, path: Path, st: os.stat_result) -> None:
        info = self._info(name, tarfile.SYMTYPE, st)
        info.linkname = os.readlink(path)
        self.tar.addfile(info)
        self._entry(info, "symlink", target=info.linkname)

    def add_tree(self, name: str, root: Path) -> None:
        """Add the folder ``root`` and everything below it (links not followed), sorted."""
        self.add_dir(name, root.stat())
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            base = Path(folder)
            prefix = f"{name}/{base.relative_to(root).as_posix()}".removesuffix("/.")
            for entry in sorted(dirs + files):
                self._add_any(f"{prefix}/{entry}", base / entry, set(files))
            dirs[:] = [d for d in dirs if not (base / d).is_symlink()]

    def _add_any(self, name: str, path: Path, files: set[str]) -> None:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return  # gone since the folder was listed
        if stat.S_ISLNK(st.st_mode):
            self.add_symlink(name, path, st)
        elif stat.S_ISDIR(st.st_mode):
            self.add_dir(name, st)
        elif stat.S_ISREG(st.st_mode) and not _is_sidecar(path, files):
            if is_sqlite_file(path):
                self.add_database(name, path)
            else:
                self._add_if_there(name, path)

    def _add_if_there(self, name: str, path: Path) -> None:
        try:
            self.add_file(name, path)
        except FileNotFoundError:
            return  # removed since the folder was listed

    def add_bytes(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
        self.tar.addfile(info, io.BytesIO(data))


def _is_sidecar(path: Path, files: set[str]) -> bool:
    """Whether ``path`` is the ``-wal``/``-shm``/``-journal`` of a SQLite file beside it."""
    for suffix in SQLITE_SIDECARS:
        if path.name.endswith(suffix) and path.name.removesuffix(suffix) in files:
            return is_sqlite_file(path.with_name(path.name.removesuffix(suffix)))
    return False


def _add_source(writer: _Writer, source: Source) -> Part | str:
    """Add one part; return its :class:`Part`, or why it was skipped."""
    name = f"{DATA}/{source.name}"
    if source.kind == "db" and source.path is None:
        dump = writer.workdir / "catalog.pgdump"
        dump_postgresql(source.url, dump, source.where)
        writer.add_file(name, dump)
        dump.unlink()
        return Part(source.name, source.kind, source.where, "postgresql")
    path = source.path
    assert path is not None
    if source.kind == "tree":
        if not path.is_dir():
            return f"no folder {path}"
        writer.add_tree(name, path)
        return Part(source.name, source.kind, source.where)
    if not path.is_file():
        return f"no file {path}"
    if source.kind == "db" or is_sqlite_file(path):
        writer.add_database(name, path)
    else:
        writer.add_file(name, path)
    return Part(source.name, source.kind, source.where, "sqlite" if source.kind == "db" else "")


def write_backup(sources: Sequence[Source], target: Path, *, version: str) -> BackupSummary:
    """Back up ``sources`` into the new archive ``target``; return what was written.

    Parameters
    ----------
    sources : sequence of Source
        The parts (:func:`coursehub.backup.sources.find_sources`); a file or
        folder part not found here is skipped and listed in the manifest.
    target : pathlib.Path
        The archive to write: gzip-compressed unless its name ends in ``.tar``.
    version : str
        coursehub's version, written in the header and the manifest.

    Raises
    ------
    UsageError
        ``target`` exists already, its folder does not, or lies in a folder part.
    coursehub.backup.databases.DatabaseCopyError
        A database could not be copied or dumped.
    ArchiveError
        A file changed size while it was read.
    OSError
        The archive could not be written (disk full...); nothing is left behind.
    """
    if target.exists() or target.is_symlink():
        raise UsageError(f"{target} exists already: give another name or folder")
    if not target.parent.is_dir():
        raise UsageError(f"no folder {target.parent} for the backup")
    _check_outside(target, sources)
    started = time.monotonic()
    created = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    manifest = Manifest(created, version, socket.gethostname(), (), ())
    fd, partial_name = tempfile.mkstemp(prefix=f".{target.name}.partial-", dir=target.parent)
    partial = Path(partial_name)
    try:
        with os.fdopen(fd, "wb") as raw:
            parts, skipped, entries = _write_tar(raw, target, sources, manifest)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _sync_dir(target.parent)
    files = [e for e in entries if e.type == "file"]
    return BackupSummary(
        target,
        target.stat().st_size,
        len(files),
        sum(e.size for e in files),
        parts,
        skipped,
        time.monotonic() - started,
    )


def _check_outside(target: Path, sources: Sequence[Source]) -> None:
    """Refuse an archive written inside a folder it backs up (it would read itself)."""
    folder = target.parent.resolve()
    for source in sources:
        if source.kind == "tree" and source.path is not None and source.path.is_dir():
            root = source.path.resolve()
            if folder == root or root in folder.parents:
                raise UsageError(
                    f"{target} would lie in {source.name} ({root}), which it backs up: "
                    "write it elsewhere"
                )


def _open_tar(raw: BinaryIO, *, gzip: bool) -> tarfile.TarFile:
    """A tar file (POSIX.1-2001 pax format) writing to ``raw``, gzip-compressed or not."""
    if gzip:
        return tarfile.open(
            fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=GZIP_LEVEL
        )
    return tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT)


def _write_tar(
    raw: BinaryIO, target: Path, sources: Sequence[Source], manifest: Manifest
) -> tuple[tuple[Part, ...], tuple[tuple[str, str], ...], tuple[Entry, ...]]:
    with (
        tempfile.TemporaryDirectory(prefix=".coursehub-backup-", dir=target.parent) as work,
        _open_tar(raw, gzip=not target.name.endswith(".tar")) as tar,
    ):
        writer = _Writer(tar, Path(work))
        writer.add_bytes(HEADER_NAME, json.dumps(manifest.header(), indent=1).encode() + b"\n")
        parts: list[Part] = []
        skipped: list[tuple[str, str]] = []
        for source in sources:
            done = _add_source(writer, source)
            if isinstance(done, Part):
                parts.append(done)
            else:
                skipped.append((source.name, done))
        full = Manifest(
            manifest.created,
            manifest.coursehub_version,
            manifest.host,
            tuple(parts),
            tuple(skipped),
            tuple(writer.entries),
        )
        text = full.to_json().encode()
        writer.add_bytes(MANIFEST_NAME, text)
        writer.add_bytes(MANIFEST_SUM_NAME, (sha256_hex(text) + "\n").encode())
    return full.parts, full.skipped, full.entries


def _sync_dir(folder: Path) -> None:
    """Flush a folder's entries (the rename) to disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
