"""Append-only usage files: one JSON line per record, one file per writer and day.

A record is appended with one ``write(2)`` on a descriptor opened with
``O_APPEND`` (POSIX ``write``: "the file offset shall be set to the end of the
file prior to each write and no intervening file modification operation
shall occur"), so writers in several threads or processes never interleave
inside a line, and a crash leaves at most one incomplete last line, which a
reader skips until it is complete. Files are owner-only (0o600) in an
owner-only folder: they name users and courses.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.filemodes import ensure_private_dir
from coursehub.meter.records import RecordError, UsageRecord, parse_record, render_record, shown

#: Environment variable naming the usage folder of this hub / runner.
USAGE_DIR_VAR = "COURSEHUB_USAGE_DIR"
#: Suffix of usage files.
SUFFIX = ".jsonl"


def hub_usage_folder(runtime_dir: str | os.PathLike[str], hub_id: str) -> Path:
    """Return a hub's own usage folder: ``<runtime_dir>/usage-<hub id>``.

    One folder per hub, as the servers' runtime folders
    (``servers-<hub id>``, :mod:`coursehub.spawn.runtimedir`): hubs of one
    host (production, a demo, a test run as root) share the runtime
    directory (``/run/coursehub`` as root) but never each other's records,
    so an ingest of one hub's folder reads that hub's servers and jobs only.
    The jobs' folder is its sibling ``usage-<hub id>-jobs``
    (:func:`coursehub.meter.sampler.job_folder`).
    """
    return Path(runtime_dir) / f"usage-{hub_id}"


def journal_path(folder: Path, source: str, at: float) -> Path:
    """Return ``folder/<source>-<YYYY-MM-DD>.jsonl``: the file of a record made at ``at`` (UTC)."""
    if not source or "/" in source or source.startswith("."):
        raise ValueError(f"usage source must be a plain file name part, got {source!r}")
    day = time.strftime("%Y-%m-%d", time.gmtime(at))
    return Path(folder) / f"{source}-{day}{SUFFIX}"


def append_record(folder: Path, source: str, record: UsageRecord) -> Path:
    """Append ``record`` to this source's file of the record's day; return the file.

    A folder this process owns (or makes) is made owner-only; another's
    (the shared jobs folder, :func:`coursehub.meter.sampler.ensure_job_folder`)
    keeps its mode. In a shared folder another user may have made the file's
    name first: the file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (never a
    link, never a FIFO waited on) and written only when it is a regular file
    of this process's user.

    Raises
    ------
    OSError
        If the folder or file cannot be written, or the file is not this user's own.
    """
    if not Path(folder).is_dir() or Path(folder).stat().st_uid == os.geteuid():
        ensure_private_dir(folder)  # ours: owner-only; a shared jobs folder is left as made
    path = journal_path(folder, source, record.at)
    data = render_record(record).encode("ascii")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise OSError(f"{path} is not a file of this user: another made it first")
        written = os.write(fd, data)
        if written != len(data):  # a full disk: never leave half a line behind silently
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
    finally:
        os.close(fd)
    return path


#: Longest line read as a record, in bytes (a record is about 300).
MAX_LINE_BYTES = 64 * 1024
#: Largest usage file read at all, in bytes (a hub's file of a day, 1,000 servers
#: sampled every minute: about 360 MB).
MAX_FILE_BYTES = 2 * 2**30
#: Bytes of one file read in one call; the rest waits for the next ingest.
MAX_READ_BYTES = 64 * 2**20
#: Bytes asked of ``read(2)`` at a time.
_CHUNK = 1 << 20


class JournalError(CoursehubError):
    """A usage file that is not read: a symbolic link, not a regular file, too large."""


@dataclass(frozen=True)
class ReadBatch:
    """Records read from one file from an offset on.

    Attributes
    ----------
    records
        Complete, valid records in file order.
    problems
        ``"<file>:<byte offset>: <why>"`` for each complete line that is not a record.
    offset
        Byte offset after the last line read (where the next read starts).
    owner_uid
        The file's owner, from ``fstat(2)`` of the descriptor the lines were read from.
    links
        The file's hard links (1 for a file made in its folder).
    """

    records: list[UsageRecord]
    problems: list[str]
    offset: int
    owner_uid: int = -1
    links: int = 1


def read_records(
    path: Path,
    offset: int = 0,
    *,
    max_line: int = MAX_LINE_BYTES,
    max_file: int = MAX_FILE_BYTES,
    max_read: int = MAX_READ_BYTES,
) -> ReadBatch:
    """Read the complete lines of ``path`` from byte ``offset``; an unfinished last line waits.

    The file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a symbolic link is
    never followed, a FIFO never waited on) and checked on that descriptor
    (``fstat(2)``): a regular file of at most ``max_file`` bytes. It is read
    ``read(2)`` by ``read(2)``, never whole: at most ``max_read`` bytes a call
    (the offset says where the next call goes on), and a line longer than
    ``max_line`` bytes is reported and skipped.

    Raises
    ------
    JournalError
        If ``path`` is a symbolic link, not a regular file, or larger than ``max_file``.
    OSError
        If the file cannot be opened or read.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise JournalError("a symbolic link, not followed") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JournalError("not a regular file")
        if info.st_size > max_file:
            raise JournalError(
                f"{info.st_size} bytes, more than the {max_file} a usage file may have"
            )
        records, problems, end = _read_lines(fd, shown(path.name), offset, max_line, max_read)
    finally:
        os.close(fd)
    return ReadBatch(records, problems, end, info.st_uid, info.st_nlink)


def _read_lines(
    fd: int, name: str, offset: int, max_line: int, max_read: int
) -> tuple[list[UsageRecord], list[str], int]:
    """Parse the lines from ``offset`` on; return records, problems and the offset reached."""
    records: list[UsageRecord] = []
    problems: list[str] = []
    pending = b""  # the start of a line not yet ended
    start = position = offset  # ``start``: where ``pending`` begins in the file
    skipping = False  # inside a line already reported as too long
    while position - offset < max_read:
        chunk = os.pread(fd, min(_CHUNK, offset + max_read - position), position)
        if not chunk:
            break
        position += len(chunk)
        data, at = pending + chunk, 0
        while (newline := data.find(b"\n", at)) >= 0:
            line, at = data[at : newline + 1], newline + 1
            if skipping:
                skipping = False
            elif len(line) > max_line:
                problems.append(f"{name}:{start}: a line longer than {max_line} bytes")
            else:
                _parse_line(line, f"{name}:{start}", records, problems)
            start += len(line)
        pending = data[at:]
        if len(pending) > max_line:
            if not skipping:
                problems.append(f"{name}:{start}: a line longer than {max_line} bytes")
            skipping = True
            start += len(pending)
            pending = b""
    return records, problems, start


def _parse_line(raw: bytes, where: str, records: list[UsageRecord], problems: list[str]) -> None:
    try:
        records.append(parse_record(raw.decode("utf-8")))
    except (RecordError, UnicodeDecodeError) as exc:
        problems.append(f"{where}: {exc}")


def list_journals(folder: Path) -> list[Path]:
    """Return the usage files in ``folder``, sorted by name ([] if the folder is absent).

    Entries are looked at without following symbolic links
    (``lstat(2)``): a link or another entry named like a usage file that is
    not a folder is listed, so that :func:`read_records` reports it.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:
        return sorted(
            folder / e.name
            for e in entries
            if e.name.endswith(SUFFIX) and not e.is_dir(follow_symlinks=False)
        )
