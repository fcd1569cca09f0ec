"""The archive's layout and its manifest: what each member is, its size, SHA-256, mode and owner.

An archive (a tar file, gzip-compressed when its name ends in ``.gz``) holds,
in this order::

    coursehub-backup.json      the header: format, format version, coursehub version, date
    data/<part>                a file or database part (data/catalog, data/lti/tool-key.pem)
    data/<part>/...            a folder part and everything below it (data/grading/courses/...)
    MANIFEST.json              every member above: type, size in bytes, SHA-256, mode, owner
    MANIFEST.sha256            the SHA-256 of MANIFEST.json, as 64 hex digits

The manifest is the authority on restore: every member's content must match
its SHA-256 and size, every entry must have its member, no other member may
be there, and modes and owners are taken from it (not from the tar headers,
which no checksum covers).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from coursehub.errors import CoursehubError

#: The format's name and the version this module writes and reads.
FORMAT = "coursehub-backup"
FORMAT_VERSION = 1
HEADER_NAME = "coursehub-backup.json"
MANIFEST_NAME = "MANIFEST.json"
MANIFEST_SUM_NAME = "MANIFEST.sha256"
#: Folder of the parts in the archive.
DATA = "data"
#: The types of member a backup holds.
TYPES = ("file", "dir", "symlink")
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")


class ArchiveError(CoursehubError):
    """An archive that is damaged, foreign, or of another format version; the message
    names the archive and the member."""


@dataclass(frozen=True)
class Entry:
    """One member of the archive, as the manifest lists it.

    Attributes
    ----------
    name : str
        The member's name, e.g. ``"data/grading/courses/phys-2025/gradebook.db"``.
    type : str
        One of :data:`TYPES`.
    mode : int
        Permission bits (``stat.S_IMODE``: setuid, setgid and sticky included).
    uid, gid : int
        Numeric owner and group where it was backed up.
    user, group : str
        Their names there (``""``: no name); a restore as root looks names up first.
    size : int
        A file's size in bytes (0 otherwise).
    sha256 : str
        A file's SHA-256, 64 lower-case hex digits (``""`` otherwise).
    target : str
        A symbolic link's target (``""`` otherwise).
    """

    name: str
    type: str
    mode: int
    uid: int
    gid: int
    user: str = ""
    group: str = ""
    size: int = 0
    sha256: str = ""
    target: str = ""


@dataclass(frozen=True)
class Part:
    """One part of the backup (:class:`coursehub.backup.sources.Source`) as it was backed up.

    Attributes
    ----------
    name, kind : str
        As the source's; ``backend`` is ``"sqlite"`` or ``"postgresql"`` for the catalog.
    where : str
        Where it lived (a PostgreSQL URL without password), for the reader.
    backend : str
        The catalog's backend (``""`` for other parts).
    """

    name: str
    kind: str
    where: str
    backend: str = ""


@dataclass(frozen=True)
class Manifest:
    """The manifest: the header's fields, the parts, the skipped parts and every member."""

    created: str
    coursehub_version: str
    host: str
    parts: tuple[Part, ...]
    skipped: tuple[tuple[str, str], ...]
    entries: tuple[Entry, ...] = field(default=())
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def header(self) -> dict[str, Any]:
        """The fields of ``coursehub-backup.json``."""
        keys = ("format", "format_version", "coursehub_version", "created", "host")
        return {key: getattr(self, key) for key in keys}

    def to_json(self) -> str:
        """The manifest as JSON text (UTF-8, sorted keys, one entry per line)."""
        body = self.header() | {
            "parts": [asdict(p) for p in self.parts],
            "skipped": [list(s) for s in self.skipped],
            "files": [asdict(e) for e in self.entries],
        }
        return json.dumps(body, indent=1, sort_keys=True) + "\n"


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` as 64 lower-case hex digits (:mod:`hashlib`)."""
    return hashlib.sha256(data).hexdigest()


def check_header(archive: str, name: str, data: bytes) -> dict[str, Any]:
    """Return the header of ``archive`` whose first member is ``name`` holding ``data``.

    Raises
    ------
    ArchiveError
        The first member is not :data:`HEADER_NAME` or not the header of
        :data:`FORMAT` (a foreign archive), or of a newer format version.
    """
    header: Any = None
    if name == HEADER_NAME:
        try:
            header = json.loads(data)
        except ValueError:
            header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ArchiveError(
            f"{archive} is not a coursehub backup: its first member is {name!r}, "
            f"not the header {HEADER_NAME}"
        )
    if header.get("format_version") != FORMAT_VERSION:
        raise ArchiveError(
            f"{archive} is a coursehub backup of format version {header.get('format_version')!r}; "
            f"this coursehub reads version {FORMAT_VERSION}"
        )
    return header


def parse_manifest(archive: str, data: bytes, digest: bytes) -> Manifest:
    """Return the manifest ``data`` of ``archive`` after checking it against ``digest``.

    Raises
    ------
    ArchiveError
        ``digest`` is not the SHA-256 of ``data``, or the manifest is not one
        (bad JSON, a missing key, a bad type or checksum), naming the member.
    """
    given = digest.decode("ascii", "replace").strip()
    if given != sha256_hex(data):
        raise ArchiveError(
            f"{archive}: member {MANIFEST_NAME} is damaged: its SHA-256 is not the one "
            f"{MANIFEST_SUM_NAME} gives"
        )
    try:
        body = json.loads(data)
        entries = tuple(_entry(row) for row in body["files"])
        parts = tuple(Part(**row) for row in body["parts"])
        skipped = tuple((str(a), str(b)) for a, b in body["skipped"])
        return Manifest(
            created=str(body["created"]),
            coursehub_version=str(body["coursehub_version"]),
            host=str(body["host"]),
            parts=parts,
            skipped=skipped,
            entries=entries,
            format=body["format"],
            format_version=body["format_version"],
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(f"{archive}: member {MANIFEST_NAME} is not a manifest: {exc}") from exc


def _entry(row: Mapping[str, Any]) -> Entry:
    entry = Entry(**row)
    numbers = (entry.mode, entry.uid, entry.gid, entry.size)
    if entry.type not in TYPES or not all(isinstance(n, int) and n >= 0 for n in numbers):
        raise ValueError(f"bad entry {entry.name!r}")
    if entry.type == "file" and not _SHA256.match(entry.sha256):
        raise ValueError(f"bad SHA-256 of {entry.name!r}")
    check_member_name(entry.name)
    return entry


def check_member_name(name: str) -> str:
    """Return ``name`` if it is ``data`` followed by plain path components, else raise ValueError.

    Refused: absolute names, ``.`` or ``..`` components, empty components,
    backslashes and NUL: a member never lands outside its part.
    """
    parts = name.split("/")
    if parts[0] != DATA or len(parts) < 2 or "\\" in name or "\x00" in name:
        raise ValueError(f"member name {name!r} is not below {DATA}/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"member name {name!r} has an empty, '.' or '..' component")
    return name


def part_of(name: str, parts: Sequence[Part]) -> Part | None:
    """Return the part that member ``name`` belongs to (``data/<part>`` or below it)."""
    for part in parts:
        root = f"{DATA}/{part.name}"
        if name == root or (part.kind == "tree" and name.startswith(root + "/")):
            return part
    return None
