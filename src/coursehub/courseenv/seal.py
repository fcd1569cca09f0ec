"""A finished build, sealed and read by root without running it.

:func:`seal_build` makes every file root's and read-only for others;
:func:`installed_packages` reads the ``*.dist-info`` files;
:func:`interpreter_links` and :func:`plan_interpreter_change` tell whether a
package replaced the build's ``bin/python*``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from coursehub.courseenv.errors import EnvBuildError

#: Deepest folder a build may hold (a venv has fewer than 20 levels).
MAX_BUILD_DEPTH = 100


def interpreter_links(build: Path) -> dict[str, str | None]:
    """Return ``bin/python*`` of ``build``: name -> link target, or None for a file that is no link.

    Read with ``lstat``/``readlink`` only: nothing of the build is followed or run.
    """
    links: dict[str, str | None] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in (build / "bin").iterdir():
            if entry.name.startswith("python"):
                links[entry.name] = os.readlink(entry) if entry.is_symlink() else None
    return links


def plan_interpreter_change(
    before: Mapping[str, str | None], after: Mapping[str, str | None]
) -> list[str]:
    """Return the ``bin/python*`` names a package install added, removed or changed (pure).

    ``python -m venv`` makes them links to the base interpreter; a wheel's
    ``.data/scripts/python`` would replace one with its own script, and every
    kernel of the course would then run that instead of Python.

    >>> plan_interpreter_change({"python": "/usr/bin/python3"}, {"python": None})
    ['python']
    """
    return sorted(n for n in {*before, *after} if before.get(n, "") != after.get(n, ""))


def installed_packages(build: Path) -> list[str]:
    """Return ``name==version`` of every package in the build, sorted (case-insensitive).

    Read from the ``*.dist-info/METADATA`` files of the build's
    ``site-packages`` (``importlib.metadata``) by this process: the new
    interpreter is never started, so no ``.pth`` file of the build runs.
    A ``site-packages`` outside the build (through a link), a ``dist-info``
    folder or ``METADATA`` that is a symbolic link is skipped.
    """
    found = set()
    inside = build.resolve()
    for site in sorted(build.glob("lib/python*/site-packages")):
        if site.is_symlink() or not site.resolve().is_relative_to(inside):
            continue  # a link out of the build (lib -> /root/...): never read as root
        for info in site.glob("*.dist-info"):
            metadata = info / "METADATA"
            if info.is_symlink() or metadata.is_symlink() or not metadata.is_file():
                continue
            dist = importlib.metadata.PathDistribution(info)
            name, version = dist.metadata["Name"], dist.metadata["Version"]
            if name and version:
                found.add(f"{name}=={version}")
    return sorted(found, key=str.lower)


def _sealed_mode(mode: int) -> int:
    """Return ``mode`` without write bits for group and others and without set-id bits."""
    return stat.S_IMODE(mode) & 0o755


def seal_build(build: Path) -> None:
    """Make every file of ``build`` root's (as root) and read-only for group and others.

    Walks with file descriptors (``O_NOFOLLOW``, ``dir_fd``), so that a link
    swapped in during the walk is never followed: symbolic links are kept
    (their owner changed), folders and regular files get
    :func:`_sealed_mode`.

    Raises
    ------
    EnvBuildError
        If the build holds a special file (FIFO, socket, device), a regular
        file with another name elsewhere (a hard link), or folders deeper
        than :data:`MAX_BUILD_DEPTH`.
    """
    owner = 0 if os.geteuid() == 0 else -1
    fd = os.open(build, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _seal_folder(fd, build, owner, 0)
    finally:
        os.close(fd)


def _seal_folder(fd: int, where: Path, owner: int, depth: int) -> None:
    if depth > MAX_BUILD_DEPTH:
        raise EnvBuildError(f"the build holds folders deeper than {MAX_BUILD_DEPTH}: {where}")
    os.fchown(fd, owner, owner)
    os.fchmod(fd, _sealed_mode(os.fstat(fd).st_mode))
    for name in os.listdir(fd):
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            os.chown(name, owner, owner, dir_fd=fd, follow_symlinks=False)
            continue
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        if stat.S_ISDIR(info.st_mode):
            sub = os.open(name, flags | os.O_DIRECTORY, dir_fd=fd)
            try:
                _seal_folder(sub, where / name, owner, depth + 1)
            finally:
                os.close(sub)
            continue
        if not stat.S_ISREG(info.st_mode):
            raise EnvBuildError(f"the build holds a special file: {where / name}")
        sub = os.open(name, flags, dir_fd=fd)
        try:
            opened = os.fstat(sub)
            if not stat.S_ISREG(opened.st_mode) or opened.st_nlink > 1:
                raise EnvBuildError(f"the build holds a hard link or special file: {where / name}")
            os.fchown(sub, owner, owner)
            os.fchmod(sub, _sealed_mode(opened.st_mode))
        finally:
            os.close(sub)
