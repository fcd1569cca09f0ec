"""The record of the last backup made on this host, which ``coursehub doctor`` reads.

``coursehub backup`` writes ``last-backup.json`` (mode 0600) after each archive
it completes: the archive's path, its date (UTC, ISO 8601), its size in bytes,
its number of files, and the names of the parts it holds and of those it
skipped (not found here). The record goes with what was backed up
(:func:`record_path`): in ``COURSEHUB_DATA_DIR`` when it is set, else beside the
catalog's SQLite file, else in the default data directory
(:func:`coursehub.settings.data_dir`). It is in no part of a backup, so a
restore never brings back another host's record.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.settings import data_dir

RECORD_NAME = "last-backup.json"


@dataclass(frozen=True)
class BackupRecord:
    """The last backup: ``archive``, ``created`` (ISO 8601, UTC), ``size`` (bytes), ``files``.

    ``parts`` and ``skipped`` name the parts it holds and those it skipped
    (empty in a record written before they were recorded).
    """

    archive: str
    created: str
    size: int
    files: int
    parts: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    @property
    def created_at(self) -> datetime:
        """``created`` as an aware datetime (UTC)."""
        return datetime.fromisoformat(self.created.replace("Z", "+00:00")).astimezone(UTC)


def record_path(environ: Mapping[str, str] | None = None, database_url: str | None = None) -> Path:
    """Return where the record of a backup of this catalog lives.

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; None: ``os.environ``.
    database_url : str, optional
        The catalog backed up (default: ``COURSEHUB_DATABASE_URL``, else the
        SQLite file in the data directory, :func:`coursehub.catalog.db.database_url`).

    Returns
    -------
    pathlib.Path
        ``last-backup.json`` in ``COURSEHUB_DATA_DIR`` when it is set; else in the
        folder of the catalog's SQLite file; else (PostgreSQL) in the default
        data directory.
    """
    from sqlalchemy.engine import make_url

    from coursehub.catalog.db import database_url as default_url

    env = os.environ if environ is None else environ
    if env.get("COURSEHUB_DATA_DIR"):
        return data_dir(env) / RECORD_NAME
    url = make_url(database_url or default_url(env))
    database = url.database or ""
    is_file = database not in ("", ":memory:") and not database.startswith("file:")
    if url.get_backend_name() == "sqlite" and is_file:
        return Path(database).expanduser().parent / RECORD_NAME
    return data_dir(env) / RECORD_NAME


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
    fields = json.loads(text)
    for name in ("parts", "skipped"):
        fields[name] = tuple(fields.get(name, ()))
    record = BackupRecord(**fields)
    record.created_at  # noqa: B018 (a bad date raises ValueError here)
    return record
