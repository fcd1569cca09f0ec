"""Check an archive before anything is written: every member against its manifest entry.

The archive is read once, start to end (:mod:`tarfile`): the header first (a
foreign archive is refused at its first member), every member's content hashed
(SHA-256, :mod:`hashlib`), then the manifest, checked against
``MANIFEST.sha256``, and compared with what was read. A damaged gzip stream,
a truncated archive, a missing, extra or altered member is refused with a
message naming the archive and the member.
"""

from __future__ import annotations

import hashlib
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from coursehub.backup.manifest import (
    DATA,
    HEADER_NAME,
    MANIFEST_NAME,
    MANIFEST_SUM_NAME,
    ArchiveError,
    Entry,
    Manifest,
    check_header,
    check_member_name,
    parse_manifest,
    part_of,
)

#: Bytes read at a time from a member.
CHUNK = 1 << 20
#: Largest header, manifest or checksum member read (bytes).
MAX_META_BYTES = 256 << 20
#: tar member type -> manifest type.
TAR_TYPES = {tarfile.REGTYPE: "file", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink"}


@dataclass(frozen=True)
class Seen:
    """A member as read: its type, size, SHA-256 (files) and link target (symbolic links)."""

    type: str
    size: int = 0
    sha256: str = ""
    target: str = ""


def hash_stream(stream: object, sink: object = None) -> tuple[int, str]:
    """Read ``stream`` to its end in :data:`CHUNK` pieces (written to ``sink`` if given);
    return its size in bytes and SHA-256 as hex."""
    digest = hashlib.sha256()
    size = 0
    while chunk := stream.read(CHUNK):  # type: ignore[attr-defined]
        digest.update(chunk)
        size += len(chunk)
        if sink is not None:
            sink.write(chunk)  # type: ignore[attr-defined]
    return size, digest.hexdigest()


def members(archive: Path) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    """Yield every member of ``archive`` with its open tar file, in archive order.

    Raises
    ------
    ArchiveError
        The archive cannot be opened or read to its end (not a tar file, a
        damaged gzip stream, truncated), naming the member being read.
    """
    current = ""
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            for info in tar:
                current = info.name
                yield tar, info
            # read on to the end, so that gzip checks its CRC-32 and length
            # (RFC 1952): a changed byte may otherwise end the tar early
            while tar.fileobj is not None and tar.fileobj.read(CHUNK):
                pass
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        error = damaged(archive, current, exc)
        if error is exc:
            raise
        raise error from exc


def damaged(archive: Path, current: str, exc: BaseException) -> BaseException:
    """Return the :class:`ArchiveError` for ``exc`` met while reading ``archive`` at member
    ``current`` ("": before the first); an ``OSError`` naming a file is returned as is."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return exc
    if isinstance(exc, tarfile.ReadError) and not current:
        return ArchiveError(f"{archive} is not a readable tar archive: damaged, or not a backup")
    where = f" at member {current}" if current else ""
    what = "cut short" if isinstance(exc, EOFError) else str(exc)
    return ArchiveError(f"{archive} is damaged{where}: {what}")


def _read_meta(tar: tarfile.TarFile, info: tarfile.TarInfo, archive: Path) -> bytes:
    stream = tar.extractfile(info) if info.isfile() else None
    if stream is None or info.size > MAX_META_BYTES:
        raise ArchiveError(f"{archive}: member {info.name} is not a small regular file")
    return stream.read()


def _seen(tar: tarfile.TarFile, info: tarfile.TarInfo, archive: Path) -> Seen:
    kind = TAR_TYPES.get(info.type)
    try:
        check_member_name(info.name)
    except ValueError as exc:
        raise ArchiveError(f"{archive}: {exc}") from None
    if kind is None:
        raise ArchiveError(f"{archive}: member {info.name} is of a type a backup never holds")
    if kind == "file":
        size, digest = hash_stream(tar.extractfile(info))
        return Seen(kind, size, digest)
    return Seen(kind, target=info.linkname if kind == "symlink" else "")


def read_archive(archive: Path) -> tuple[Manifest, dict[str, Seen]]:
    """Read ``archive`` once; return its manifest and every data member as read.

    Raises
    ------
    ArchiveError
        Foreign (no coursehub header first), damaged, or without a manifest.
    """
    header_seen = False
    meta: dict[str, bytes] = {}
    seen: dict[str, Seen] = {}
    current = ""
    try:
        for tar, info in members(archive):
            current = info.name
            header_seen = _take(tar, info, archive, header_seen, meta, seen)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:  # reading a member's data
        error = damaged(archive, current, exc)
        if error is exc:
            raise
        raise error from exc
    if not header_seen:
        raise ArchiveError(f"{archive} is empty: not a coursehub backup")
    for name in (MANIFEST_NAME, MANIFEST_SUM_NAME):
        if name not in meta:
            raise ArchiveError(f"{archive} is damaged: member {name} is missing (cut short?)")
    return parse_manifest(str(archive), meta[MANIFEST_NAME], meta[MANIFEST_SUM_NAME]), seen


def _take(
    tar: tarfile.TarFile,
    info: tarfile.TarInfo,
    archive: Path,
    header_seen: bool,
    meta: dict[str, bytes],
    seen: dict[str, Seen],
) -> bool:
    """Read one member into ``meta`` or ``seen``; return whether the header was seen."""
    if not header_seen:
        first = _read_meta(tar, info, archive) if info.name == HEADER_NAME else b""
        check_header(str(archive), info.name, first)
        header_seen = True
    elif info.name in (MANIFEST_NAME, MANIFEST_SUM_NAME) and info.name not in meta:
        meta[info.name] = _read_meta(tar, info, archive)
    elif info.name in seen or info.name in meta or info.name == HEADER_NAME:
        raise ArchiveError(f"{archive}: member {info.name} is there twice")
    else:
        seen[info.name] = _seen(tar, info, archive)
    return True


def compare(archive: Path, manifest: Manifest, seen: dict[str, Seen]) -> None:
    """Check every member read against its manifest entry, and the entries' shape.

    Raises
    ------
    ArchiveError
        A member missing, extra, of another type, size or SHA-256, or a link
        target changed; an entry below no part, a part of one file with more, or
        an entry whose parent is not a folder entry of its part (nothing is ever
        written through a symbolic link); each message names the member.
    """
    listed = {e.name: e for e in manifest.entries}
    for name in seen:
        if name not in listed:
            raise ArchiveError(f"{archive}: member {name} is not in the manifest")
    for entry in manifest.entries:
        got = seen.get(entry.name)
        if got is None:
            raise ArchiveError(f"{archive} is damaged: member {entry.name} is missing")
        expected = Seen(entry.type, entry.size, entry.sha256, entry.target)
        if got != expected:
            raise ArchiveError(
                f"{archive}: member {entry.name} is damaged: {_difference(got, expected)}"
            )
        _check_place(archive, manifest, entry, listed)


def _difference(got: Seen, expected: Seen) -> str:
    if got.type != expected.type:
        return f"a {got.type}, the manifest says a {expected.type}"
    if got.size != expected.size:
        return f"{got.size} bytes, the manifest says {expected.size}"
    if got.sha256 != expected.sha256:
        return f"SHA-256 {got.sha256}, the manifest says {expected.sha256}"
    return f"link to {got.target!r}, the manifest says {expected.target!r}"


def _check_place(archive: Path, manifest: Manifest, entry: Entry, listed: dict[str, Entry]) -> None:
    part = part_of(entry.name, manifest.parts)
    root = f"{DATA}/{part.name}" if part else ""
    if part is None:
        problem = "belongs to no part of the manifest"
    elif entry.name == root:
        problem = "" if entry.type == ("dir" if part.kind == "tree" else "file") else "wrong type"
    else:
        parent = listed.get(entry.name.rsplit("/", 1)[0])
        problem = (
            "" if parent is not None and parent.type == "dir" else "has no folder entry above it"
        )
    if problem:
        raise ArchiveError(f"{archive}: member {entry.name} {problem}")
    if part is not None and part.kind == "tree" and root not in listed:
        raise ArchiveError(f"{archive} is damaged: member {root} is missing")


def verify_archive(archive: Path) -> Manifest:
    """Read and check all of ``archive``; return its manifest. Nothing is written.

    Raises
    ------
    ArchiveError
        As :func:`read_archive` and :func:`compare`.
    UsageError
        ``archive`` is not a file.
    """
    from coursehub.errors import UsageError

    if not archive.is_file():
        raise UsageError(f"no backup file {archive}")
    manifest, seen = read_archive(archive)
    compare(archive, manifest, seen)
    for part in manifest.parts:
        if f"{DATA}/{part.name}" not in seen:
            raise ArchiveError(f"{archive} is damaged: member {DATA}/{part.name} is missing")
    return manifest
