"""Which folders a sandboxed job gets hidden, covered and shown again (pure but for ``stat``).

:func:`coursehub.sandbox.plan.make_plan` decides with these what
:func:`coursehub.sandbox.command.plan_sandbox_command` mounts: the folders to
hide (:func:`hidden_paths`), the folders the sandbox account cannot enter
with what the job needs below them (:func:`plan_exposures`), and the shared
folders the job gets a private one of (:func:`plan_private`).
"""

from __future__ import annotations

import stat
from collections.abc import Iterable
from pathlib import Path

from coursehub.sandbox.account import SandboxAccount
from coursehub.sandbox.command import Exposure


def _contains(outer: Path, inner: Path) -> bool:
    return outer == inner or outer in inner.parents


def is_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder this process can see (False where it may not look)."""
    try:
        return Path(path).is_dir()
    except OSError:  # a folder above it closed to this account (EACCES)
        return False


def hidden_paths(
    paths: Iterable[str | Path],
    keep: Iterable[str | Path],
    covered: Iterable[str | Path] = (),
    shown: Iterable[str | Path] = (),
) -> list[str]:
    """Return the existing folders of ``paths`` to hide, outermost only, sorted.

    A folder that holds one of ``keep`` (the interpreter running the job, the
    job's own folder) cannot be hidden and is skipped. A folder inside
    another one to hide, or inside one of ``covered`` (already replaced by an
    exposure's tmpfs or a private folder), is hidden with it: mounting on it
    after its parent is hidden would fail ("mount point does not exist");
    but one inside a folder of ``shown`` (shown again under a cover) is hidden
    there. Pure but for the ``resolve`` and ``is_dir`` calls.
    """
    kept = [Path(k).resolve() for k in keep]
    covers = [Path(c).resolve() for c in covered]
    again = [Path(s).resolve() for s in shown]
    folders = {Path(p).resolve() for p in paths}
    folders = {f for f in folders if is_folder(f) and not any(_contains(f, k) for k in kept)}
    folders = {
        f
        for f in folders
        if not any(_contains(c, f) for c in covers) or any(_contains(s, f) for s in again)
    }
    outermost = {f for f in folders if not any(o != f and _contains(o, f) for o in folders)}
    return sorted(str(f) for f in outermost)


def can_enter(path: Path, account: SandboxAccount) -> bool:
    """Return True if ``account`` (no supplementary groups) may search the folder ``path``.

    From the mode bits and owner (inode(7)); POSIX ACLs are not read, so an
    ACL that grants access is missed (the job then gets an exposure it did
    not need, which is harmless).
    """
    try:
        info = path.stat()
    except OSError:
        return False
    if info.st_uid == account.uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == account.gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def blocking_folder(path: str | Path, account: SandboxAccount) -> Path | None:
    """Return the topmost folder on the way to ``path`` that ``account`` cannot enter, or None."""
    target = Path(path).resolve()
    for folder in [*reversed(target.parents), target]:
        if is_folder(folder) and not can_enter(folder, account):
            return folder
    return None


def plan_exposures(
    needed: Iterable[str | Path], account: SandboxAccount, writable: Iterable[str | Path] = ()
) -> list[Exposure]:
    """Return the exposures that let ``account`` read every folder of ``needed``.

    Folders of ``writable`` are needed too, and exposed writable (their
    own modes still apply inside).

    Each needed folder under a folder the account cannot enter is bind-mounted
    read-only at its own path over a tmpfs covering the topmost such folder
    (:func:`blocking_folder`), so a virtualenv under ``/root`` runs at its
    own path (its scripts and ``.pth`` files name it) while the rest of
    ``/root`` stays out of sight. Folders inside another needed folder are
    dropped; so is a needed folder that is itself the blocking one (a
    folder the account cannot read at all: :mod:`coursehub.sandbox.preflight`
    reports it).
    """
    rw = {Path(p).resolve() for p in writable if is_folder(p)}
    folders = sorted({Path(p).resolve() for p in needed if is_folder(p)} | rw)
    folders = [f for f in folders if not any(o != f and _contains(o, f) for o in folders)]
    by_cover: dict[str, list[str]] = {}
    for folder in folders:
        cover = blocking_folder(folder, account)
        if cover is not None and cover != folder:
            by_cover.setdefault(str(cover), []).append(str(folder))
    covers = sorted(by_cover)
    # a cover inside another cover is replaced by the outer one's tmpfs already
    outer = [c for c in covers if not any(o != c and _contains(Path(o), Path(c)) for o in covers)]
    merged: dict[str, list[str]] = {c: [] for c in outer}
    for inner, paths in by_cover.items():
        home = next(o for o in outer if _contains(Path(o), Path(inner)))
        merged[home].extend(paths)
    return [
        Exposure(
            cover,
            tuple(sorted(paths)),
            tuple(sorted(p for p in paths if Path(p) in rw)),
        )
        for cover, paths in sorted(merged.items())
    ]


def plan_private(
    private: Iterable[tuple[str | Path, str | Path]],
    shown: Iterable[str | Path],
    writable: Iterable[str | Path] = (),
) -> list[Exposure]:
    """Return the exposures that give a job private folders over shared ones (``/tmp``).

    Each ``(folder, target)`` pair becomes a cover of ``target`` by
    ``folder`` (bind-mounted), with every folder of ``shown`` (the
    interpreter, the job's own folder) that lies below ``target`` shown again
    at its own path, read-only but for those of ``writable``: a virtualenv
    or a job folder under ``/tmp`` still works. A pair whose target is
    missing, or is one of ``shown`` or holds none of it but lies inside one
    (the job's own folder *is* ``/tmp``), is dropped. Folders inside another
    shown folder are shown with it. Pure but for the ``resolve`` and
    ``is_dir`` calls.
    """
    rw = {Path(p).resolve() for p in writable if is_folder(p)}
    folders = sorted({Path(p).resolve() for p in shown if is_folder(p)} | rw)
    folders = [f for f in folders if not any(o != f and _contains(o, f) for o in folders)]
    exposures = []
    for source, target in private:
        cover = Path(target).resolve()
        if not is_folder(cover) or any(_contains(f, cover) for f in folders):
            continue
        paths = tuple(str(f) for f in folders if cover in f.parents)
        writable_paths = tuple(str(f) for f in folders if cover in f.parents and f in rw)
        exposures.append(Exposure(str(cover), paths, writable_paths, str(source)))
    return exposures
