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

import os
import time
from dataclasses import dataclass
from pathlib import Path

from coursehub.filemodes import ensure_private_dir
from coursehub.meter.records import RecordError, UsageRecord, parse_record, render_record

#: Environment variable naming the usage folder of this hub / runner.
USAGE_DIR_VAR = "COURSEHUB_USAGE_DIR"
#: Suffix of usage files.
SUFFIX = ".jsonl"


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
    keeps its mode.

    Raises
    ------
    OSError
        If the folder or file cannot be written.
    """
    if not Path(folder).is_dir() or Path(folder).stat().st_uid == os.geteuid():
        ensure_private_dir(folder)  # ours: owner-only; a shared jobs folder is left as made
    path = journal_path(folder, source, record.at)
    data = render_record(record).encode("ascii")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        written = os.write(fd, data)
        if written != len(data):  # a full disk: never leave half a line behind silently
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
    finally:
        os.close(fd)
    return path


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
        Byte offset after the last complete line (where the next read starts).
    """

    records: list[UsageRecord]
    problems: list[str]
    offset: int


def read_records(path: Path, offset: int = 0) -> ReadBatch:
    """Read the complete lines of ``path`` from byte ``offset``; an unfinished last line waits.

    Raises
    ------
    OSError
        If the file cannot be read.
    """
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    records, problems = [], []
    position = offset
    for raw in data[:end].splitlines(keepends=True):
        try:
            records.append(parse_record(raw.decode("utf-8")))
        except (RecordError, UnicodeDecodeError) as exc:
            problems.append(f"{path.name}:{position}: {exc}")
        position += len(raw)
    return ReadBatch(records, problems, offset + end)


def list_journals(folder: Path) -> list[Path]:
    """Return the usage files in ``folder``, sorted by name ([] if the folder is absent)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == SUFFIX and p.is_file())
