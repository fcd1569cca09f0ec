"""Autosave of exam homes to a store the student cannot write: the latest copy and its SHA-256s.

``coursehub exam snapshot COURSE ASSIGNMENT`` (root, from a timer every
minute; or ``--every 5``, a watch that copies each home within seconds of a
change, i.e. of each save) copies every exam home of the exam
(``<exam root>/<course_id>/<assignment>/<student>``,
:mod:`coursehub.examroom.home`) to::

    <store>/<course_id>/<assignment>/<student>/     root, 0700
      latest/                the copy
      SHA256SUMS             ``sha256sum``'s lines for latest/ (``sha256sum -c`` checks it)
      taken_at               when (ISO 8601, UTC)

The copy is made in a hidden folder beside ``latest`` and swapped into place
with ``rename(2)``, so ``latest`` is always one whole copy. Each file's
digest is of the bytes copied (:func:`coursehub.grading.examsubmit.file_sha256`'s
SHA-256, the manifest's digest by
:func:`coursehub.grading.examsubmit.manifest_sha256`, as a receipt's).

The student's home is read as root, so what it holds is not trusted:
symbolic links, devices and pipes are skipped, each file is opened with
``O_NOFOLLOW`` (open(2)), and a copy stops at ``max_bytes`` (the files
beyond are named as skipped).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.grading.examsubmit import CHUNK, manifest_sha256

#: Default cap of one student's copy (bytes).
MAX_BYTES = 200 * 1024 * 1024
#: Mode of the store's folders: root's only.
STORE_MODE = 0o700


@dataclass
class Snapshot:
    """One copy: its folder, ``{relative path: SHA-256}``, the manifest's SHA-256, the skipped."""

    folder: Path
    files: dict[str, str] = field(default_factory=dict)
    manifest_sha256: str = ""
    skipped: list[str] = field(default_factory=list)
    n_bytes: int = 0


def copy_file(source: Path, target: Path) -> str:
    """Copy the regular file ``source`` (never through a link) to ``target``; its SHA-256.

    Raises
    ------
    OSError
        ``source`` is a link (``ELOOP``) or cannot be read.
    """
    digest = hashlib.sha256()
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle, open(target, "wb") as out:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{source}: not a regular file")
        while block := handle.read(CHUNK):
            digest.update(block)
            out.write(block)
    os.chmod(target, 0o600)
    return digest.hexdigest()


def copy_home(home: Path, folder: Path, max_bytes: int = MAX_BYTES) -> Snapshot:
    """Copy the regular files of ``home`` into the new ``folder``; links and specials skipped."""
    snap = Snapshot(folder)
    folder.mkdir(mode=STORE_MODE)
    for dirpath, dirnames, filenames in os.walk(home):
        dirnames.sort()
        here = Path(dirpath)
        relative_dir = here.relative_to(home)
        (folder / relative_dir).mkdir(mode=STORE_MODE, exist_ok=True)
        for name in sorted(filenames):
            source = here / name
            relative = (relative_dir / name).as_posix()
            info = source.lstat()
            if not stat.S_ISREG(info.st_mode) or snap.n_bytes + info.st_size > max_bytes:
                snap.skipped.append(relative)
                continue
            try:
                snap.files[relative] = copy_file(source, folder / relative)
            except OSError:
                snap.skipped.append(relative)
                continue
            snap.n_bytes += info.st_size
    snap.manifest_sha256 = manifest_sha256(snap.files)
    return snap


def render_sums(files: dict[str, str]) -> str:
    """Return ``sha256sum``'s output for ``files`` (``<hex>  <path>`` lines, sorted by path)."""
    return "".join(f"{files[name]}  {name}\n" for name in sorted(files))


def snapshot_home(home: Path, place: Path, now: datetime, max_bytes: int = MAX_BYTES) -> Snapshot:
    """Copy ``home`` to ``place/latest`` (swapped in whole), with ``SHA256SUMS`` and ``taken_at``.

    Raises
    ------
    UsageError
        ``home`` is not a folder.
    """
    if not home.is_dir() or home.is_symlink():
        raise UsageError(f"{home}: no exam home there")
    place.mkdir(mode=STORE_MODE, parents=True, exist_ok=True)
    os.chmod(place, STORE_MODE)
    fresh, old = place / ".latest.new", place / ".latest.old"
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    snap = copy_home(home, fresh, max_bytes)
    latest = place / "latest"
    if latest.exists():
        os.rename(latest, old)
    os.rename(fresh, latest)
    snap.folder = latest
    write_atomically(place / "SHA256SUMS", render_sums(snap.files), mode=0o600)
    write_atomically(place / "taken_at", now.astimezone(UTC).isoformat() + "\n", mode=0o600)
    shutil.rmtree(old, ignore_errors=True)
    return snap


def home_state(home: Path) -> tuple[float, int]:
    """Return the newest modification time (s) and the number of entries under ``home``.

    Links are not followed; a file saved, added, removed or renamed changes it.
    """
    newest, count = home.lstat().st_mtime, 0
    for dirpath, dirnames, filenames in os.walk(home):
        for name in dirnames + filenames:
            with contextlib.suppress(OSError):
                newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
                count += 1
    return newest, count


def snapshot_exam(
    homes: Path,
    store: Path,
    now: datetime | None = None,
    max_bytes: int = MAX_BYTES,
    seen: dict[str, tuple[float, int]] | None = None,
) -> dict[str, Snapshot]:
    """Snapshot every student's home under ``homes`` (one folder per student) into ``store``.

    Returns ``{student: Snapshot}``; ``store/<student>`` for each. With
    ``seen`` (``{student: home_state}`` of the last copies, updated), a home
    unchanged since its last copy is left out (the watch of
    ``coursehub exam snapshot --every``).

    Raises
    ------
    UsageError
        ``homes`` is not a folder.
    """
    if not homes.is_dir():
        raise UsageError(f"{homes}: no exam homes there")
    moment = now or datetime.now(UTC)
    store.mkdir(mode=STORE_MODE, parents=True, exist_ok=True)
    taken = {}
    for home in sorted(homes.iterdir()):
        if not home.is_dir() or home.is_symlink() or home.name.startswith("."):
            continue
        state = home_state(home) if seen is not None else None
        if seen is not None and seen.get(home.name) == state:
            continue
        taken[home.name] = snapshot_home(home, store / home.name, moment, max_bytes)
        if seen is not None and state is not None:
            seen[home.name] = state
    return taken
