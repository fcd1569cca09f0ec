"""The record of the last backup made on this host, which ``coursehub doctor`` reads.

``coursehub backup`` writes ``last-backup.json`` in coursehub's data directory
(:func:`coursehub.settings.data_dir`; mode 0600) after each archive it
completes: the archive's path, its date (UTC, ISO 8601), its size in bytes and
its number of files. It is in no part of a backup, so a restore never brings
back another host's record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.settings import data_dir

RECORD_NAME = "last-backup.json"


@dataclass(frozen=True)
class BackupRecord:
    """The last backup: ``archive``, ``created`` (ISO 8601, UTC), ``size`` (bytes), ``files``."""

    archive: str
    created: str
    size: int
    files: int

    @property
    def created_at(self) -> datetime:
        """``created`` as an aware datetime (UTC)."""
        return datetime.fromisoformat(self.created.replace("Z", "+00:00")).astimezone(UTC)


def record_path(environ: Mapping[str, str] | None = None) -> Path:
    """``last-backup.json`` in the data directory of ``environ`` (None: ``os.environ``)."""
    return data_dir(environ) / RECORD_NAME


def write_record(record: BackupRecord, path: Path | None = None) -> Path:
    """Write ``record`` to ``path`` (default :func:`record_path`) atomically, mode 0600.

    Raises
    ------
    OSError
        The data directory cannot be written.
    """
    target = path or record_path()
    return write_atomically(target, json.dumps(asdict(record), indent=1) + "\n", 0o600)


def read_record(path: Path | None = None) -> BackupRecord | None:
    """Return the record at ``path`` (default :func:`record_path`); None if there is none.

    Raises
    ------
    ValueError
        The file is not such a record (bad JSON, a missing or extra key, a bad date).
    """
    target = path or record_path()
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    record = BackupRecord(**json.loads(text))
    record.created_at  # noqa: B018 (a bad date raises ValueError here)
    return record
