"""Put a backup back: check it all, stage every part beside its place, then switch them in.

1. The whole archive is checked (:func:`coursehub.backup.verify.verify_archive`)
   before anything is written.
2. Each part's place on this host (:func:`coursehub.backup.sources.find_sources`)
   must be empty (a missing or empty folder, no file, a catalog without
   tables) unless ``force``.
3. Each part is extracted into ``.<name>.restoring-<token>`` beside its place,
   on the same file system; every file is hashed again as it is written; modes
   and (as root) owners come from the manifest, owners by name first, as
   :mod:`tarfile` does, then by number.
4. A PostgreSQL catalog is loaded by ``pg_restore --single-transaction``; then
   each place is switched with ``rename(2)``, what was there moved aside first.
   A failure puts every place back as it was and removes what was staged; on
   success what was moved aside is deleted. The one exception: a failure of a
   rename after ``pg_restore`` committed leaves the PostgreSQL catalog restored
   (the message says which rename failed).
5. With a PostgreSQL catalog, a restored ``deploy/secrets.env`` gives the
   catalog's role its password (a new install made another one).

Restore with the hub and the course app stopped: a running one would keep
the replaced files open.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import secrets
import shutil
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from coursehub.backup.databases import (
    align_role_password,
    postgresql_tables,
    restore_postgresql,
)
from coursehub.backup.manifest import DATA, ArchiveError, Entry, Manifest, Part, part_of
from coursehub.backup.sources import Source
from coursehub.backup.verify import hash_stream, members, verify_archive
from coursehub.errors import CoursehubError, UsageError, is_storage_refused

#: The files beside a SQLite database that go with it (moved aside with it).
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


class RestoreError(CoursehubError):
    """A restore that stopped on a file it could not write or rename; nothing was changed."""


@dataclass(frozen=True)
class Placement:
    """Where one part of the archive goes on this host."""

    part: Part
    source: Source
    staging: Path | None = None

    @property
    def dest(self) -> Path | None:
        return self.source.path


@dataclass(frozen=True)
class RestoreSummary:
    """What :func:`restore_backup` did: the parts restored (name, where), files, seconds."""

    restored: tuple[tuple[str, str], ...]
    files: int
    created: str
    seconds: float


def plan_placements(
    manifest: Manifest, sources: Sequence[Source], archive: Path
) -> list[Placement]:
    """Return where each part of ``manifest`` goes among this host's ``sources``.

    Raises
    ------
    UsageError
        A part this host has no place for (usage records without a usage
        folder), or a catalog of another backend than this host's.
    """
    here = {s.name: s for s in sources}
    placements = []
    for part in manifest.parts:
        source = here.get(part.name)
        if source is None:
            raise UsageError(
                f"{archive} holds {part.name} (from {part.where}) and nothing here says where "
                f"it goes: {_place_hint(part.name)}"
            )
        backend = "postgresql" if source.kind == "db" and source.path is None else "sqlite"
        if part.kind == "db" and part.backend != backend:
            raise UsageError(
                f"{archive} holds a {part.backend} catalog and this host's catalog is "
                f"{backend} ({source.where}): restore into a {part.backend} catalog"
            )
        placements.append(Placement(part, source))
    return placements


def _place_hint(name: str) -> str:
    """What gives the part ``name`` a place on this host, for a message."""
    if name == "usage":
        return "set COURSEHUB_USAGE_DIR or give --usage-dir"
    return (
        "it is a file of a `coursehub deploy` install: give --hub-dir that install's hub "
        "folder (/var/lib/coursehub/hub)"
    )


def sqlite_tables(path: Path) -> list[str]:
    """Return the table names of the SQLite file ``path`` (opened read-only); a file that
    is not a SQLite database counts as one table (it holds something)."""
    try:
        with contextlib.closing(
            sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        ) as db:
            return [row[0] for row in db.execute("SELECT name FROM sqlite_master")]
    except sqlite3.DatabaseError:
        return [path.name]


def occupied(placement: Placement) -> bool:
    """Whether the place of ``placement`` holds something that a restore would replace."""
    dest = placement.dest
    if dest is None:
        return bool(postgresql_tables(placement.source.url))
    if placement.part.kind == "db" and dest.is_file() and not dest.is_symlink():
        return bool(sqlite_tables(dest))  # a catalog file without tables is empty
    if dest.is_symlink() or dest.is_file():
        return True
    if dest.is_dir():
        return placement.part.kind != "tree" or any(dest.iterdir())
    return dest.exists()


def _owner(entry: Entry) -> tuple[int, int]:
    """uid and gid for ``entry`` on this host: by name where the name exists, else by number."""
    try:
        uid = pwd.getpwnam(entry.user).pw_uid if entry.user else entry.uid
    except KeyError:
        uid = entry.uid
    try:
        gid = grp.getgrnam(entry.group).gr_gid if entry.group else entry.gid
    except KeyError:
        gid = entry.gid
    return uid, gid


def _staged_path(placement: Placement, name: str) -> Path:
    assert placement.staging is not None
    rest = name.removeprefix(f"{DATA}/{placement.part.name}")
    return placement.staging / rest.lstrip("/") if rest else placement.staging


def _stage(archive: Path, manifest: Manifest, placements: Sequence[Placement]) -> int:
    """Write every member into its part's staging place; return the number of files."""
    by_part = {p.part.name: p for p in placements}
    listed = {e.name: e for e in manifest.entries}
    files = 0
    for tar, info in members(archive):
        entry = listed.get(info.name)
        part = part_of(info.name, manifest.parts) if entry else None
        if entry is None or part is None:
            continue
        path = _staged_path(by_part[part.name], info.name)
        if entry.type == "dir":
            path.mkdir(mode=0o700)
        elif entry.type == "symlink":
            os.symlink(entry.target, path)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with os.fdopen(os.open(path, flags, 0o600), "wb") as out:
                size, digest = hash_stream(tar.extractfile(info), out)
                out.flush()
                os.fsync(out.fileno())
            if (size, digest) != (entry.size, entry.sha256):
                raise ArchiveError(f"{archive}: member {info.name} changed since it was checked")
            files += 1
    _set_modes(manifest, by_part)
    return files


def _set_modes(manifest: Manifest, by_part: dict[str, Placement]) -> None:
    """Give every staged entry its mode and, as root, its owner: folders last, deepest first."""
    as_root = os.geteuid() == 0
    ordered = [e for e in manifest.entries if e.type != "dir"]
    ordered += [e for e in reversed(manifest.entries) if e.type == "dir"]
    for entry in ordered:
        part = part_of(entry.name, manifest.parts)
        assert part is not None
        path = _staged_path(by_part[part.name], entry.name)
        if as_root:
            os.chown(path, *_owner(entry), follow_symlinks=False)
        if entry.type != "symlink":
            os.chmod(path, entry.mode)


def _make_parent(folder: Path, mode: int, made: list[Path]) -> None:
    """Make ``folder`` and its missing parents (``mode``), recording each one made."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=mode)
        made.append(path)


def _prepare(placements: Sequence[Placement], token: str, made: list[Path]) -> list[Placement]:
    staged = []
    for placement in placements:
        dest = placement.dest
        if dest is None:
            staged.append(placement)
            continue
        _make_parent(dest.parent, 0o755 if placement.part.kind == "tree" else 0o700, made)
        staging = dest.parent / f".{dest.name}.restoring-{token}"
        staged.append(Placement(placement.part, placement.source, staging))
    return staged


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _aside(dest: Path, kind: str) -> list[Path]:
    """``dest`` and, for a database file, its ``-wal``/``-shm``/``-journal``: what is there."""
    names = [dest] + (
        [dest.with_name(dest.name + s) for s in SQLITE_SIDECARS] if kind == "db" else []
    )
    return [p for p in names if p.exists() or p.is_symlink()]


def _switch(placements: Sequence[Placement], token: str, dump: Path | None, force: bool) -> None:
    """Load a PostgreSQL catalog, then rename each staged part into place; all or nothing."""
    moved: list[tuple[Path, Path]] = []
    placed: list[Path] = []
    try:
        for placement in placements:
            if placement.dest is None and dump is not None:
                restore_postgresql(placement.source.url, dump, placement.source.where, clean=force)
        for placement in placements:
            dest = placement.dest
            if dest is None or placement.staging is None:
                continue
            for path in _aside(dest, placement.part.kind):
                aside = path.with_name(f".{path.name}.replaced-{token}")
                os.rename(path, aside)
                moved.append((path, aside))
            os.rename(placement.staging, dest)
            placed.append(dest)
    except BaseException:
        for dest in reversed(placed):
            _remove(dest)
        for path, aside in reversed(moved):
            os.rename(aside, path)
        raise
    for _path, aside in moved:
        _remove(aside)


def check_places(placements: Sequence[Placement], force: bool) -> None:
    """Refuse places that hold something, unless ``force``.

    Raises
    ------
    UsageError
        Naming each place that is not empty.
    """
    full = [p for p in placements if occupied(p)]
    if full and not force:
        where = ", ".join(f"{p.part.name} ({p.source.where})" for p in full)
        raise UsageError(f"not empty here: {where}; restore with --force to replace them")


def restore_backup(
    archive: Path, sources: Sequence[Source], *, force: bool = False
) -> RestoreSummary:
    """Restore ``archive`` into this host's places for ``sources``; all or nothing.

    Parameters
    ----------
    archive : pathlib.Path
        A backup written by :func:`coursehub.backup.archive.write_backup`.
    sources : sequence of Source
        This host's parts (:func:`coursehub.backup.sources.find_sources`).
    force : bool
        Replace places that are not empty.

    Raises
    ------
    ArchiveError
        The archive is damaged or foreign (nothing written).
    UsageError
        A place is not empty without ``force``, or has no counterpart here.
    coursehub.backup.databases.DatabaseCopyError
        ``pg_restore`` failed; every place is as it was. Or the catalog role's
        password could not be set to the restored ``secrets.env``'s, once every
        part was restored (:func:`keep_role_password`).
    RestoreError
        A file could not be written or renamed; every place is as it was.
    OSError
        The disk or a quota is full, or the file system read-only
        (:func:`coursehub.errors.is_storage_refused`); every place is as it was.
    """
    started = time.monotonic()
    manifest = verify_archive(archive)
    placements = plan_placements(manifest, sources, archive)
    check_places(placements, force)
    token = secrets.token_hex(4)
    made: list[Path] = []
    staged = _prepare(placements, token, made)
    dump = None
    try:
        dump = _pg_staging(staged, token)
        files = _stage(archive, manifest, staged)
        _switch(staged, token, dump, force)
    except BaseException as exc:
        _clean(staged, made)
        if isinstance(exc, OSError) and not is_storage_refused(exc):
            raise RestoreError(f"restore stopped, every place is as it was: {exc}") from exc
        raise
    finally:
        if dump is not None:
            shutil.rmtree(dump.parent, ignore_errors=True)
    keep_role_password(staged)
    restored = tuple((p.part.name, p.source.where) for p in staged)
    return RestoreSummary(restored, files, manifest.created, time.monotonic() - started)


def keep_role_password(placements: Sequence[Placement]) -> None:
    """With a PostgreSQL catalog and a restored ``deploy/secrets.env``, give the catalog's
    role that file's password (:func:`coursehub.backup.databases.align_role_password`).

    Raises
    ------
    coursehub.backup.databases.DatabaseCopyError
        If the password cannot be set (every part is restored; the message says so).
    """
    by_name = {p.part.name: p for p in placements}
    catalog, env = by_name.get("catalog"), by_name.get("deploy/secrets.env")
    if catalog is not None and catalog.dest is None and env is not None and env.dest:
        align_role_password(catalog.source.url, env.dest)


def _clean(staged: Sequence[Placement], made: Sequence[Path]) -> None:
    """Remove what was staged and the empty folders made for it."""
    for placement in staged:
        if placement.staging is not None:
            _remove(placement.staging)
    for folder in reversed(made):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _pg_staging(staged: list[Placement], token: str) -> Path | None:
    """Give a PostgreSQL catalog a staging file in a private temporary folder; return it."""
    import tempfile

    for index, placement in enumerate(staged):
        if placement.dest is None:
            folder = Path(tempfile.mkdtemp(prefix=f"coursehub-restore-{token}-"))
            dump = folder / "catalog.pgdump"
            staged[index] = Placement(placement.part, placement.source, dump)
            return dump
    return None
