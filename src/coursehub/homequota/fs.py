"""What the home file system offers for a per-student limit, and the commands that set it.

:func:`detect_backend` reads ``/proc/self/mountinfo`` (proc(5)) for the
mount that holds a home and picks, by file system and mount options:

* ``xfs-project``: XFS mounted with ``prjquota``/``pquota``: the home is a
  project (id: the student's uid) limited with ``xfs_quota -x -c 'project
  -s ...'`` and ``'limit -p bhard=...'`` (xfs_quota(8));
* ``xfs-user``: XFS with ``usrquota``/``uquota``: ``xfs_quota -x -c 'limit
  -u bhard=...'`` (what the user owns on that file system);
* ``ext4-user``: ext2/3/4 with ``usrquota``, ``usrjquota=`` or ``quota``:
  ``setquota -u USER 0 HARD_KIB 0 0 MOUNT`` (setquota(8), block limits in
  1 KiB blocks);
* ``btrfs-qgroup``: btrfs, the home being a subvolume of its own (inode 256,
  ``BTRFS_FIRST_FREE_OBJECTID``), quotas on (``btrfs quota enable MOUNT``):
  ``btrfs qgroup limit BYTES HOME`` (btrfs-qgroup(8)).

Anything else (tmpfs, NFS, a btrfs home that is a plain folder, a mount
without quota options) has no backend; :class:`QuotaBackend` says why.
A limit of None removes the limit. Writes past a limit fail with
``EDQUOT`` ("Disk quota exceeded").
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import UsageError

MOUNTINFO = Path("/proc/self/mountinfo")
#: Inode number of a btrfs subvolume's root (``BTRFS_FIRST_FREE_OBJECTID``, linux/btrfs_tree.h).
BTRFS_SUBVOLUME_INODE = 256
#: Backends in the order they are preferred when a mount offers several.
BACKENDS = ("xfs-project", "xfs-user", "ext4-user", "btrfs-qgroup")
_XFS_PROJECT = {"prjquota", "pquota"}
_XFS_USER = {"usrquota", "uquota"}
_EXT_USER = {"usrquota", "quota"}


class QuotaError(UsageError):
    """A quota could not be read or set (one line: what, where, and the tool's answer)."""


@dataclass(frozen=True)
class Mount:
    """One line of mountinfo: mount point, file system type, all its options."""

    point: str
    fstype: str
    options: frozenset[str]


@dataclass(frozen=True)
class QuotaBackend:
    """How a home's limit is set: ``kind`` (one of :data:`BACKENDS`) on ``mount``, or None.

    ``reason`` says why there is none (for the command line and the logs).
    """

    kind: str | None
    mount: str
    reason: str = ""


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """Return the mounts of a ``/proc/<pid>/mountinfo`` text (pure; proc(5) field layout)."""
    mounts = []
    for line in text.splitlines():
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 6 or len(tail) < 3:
            continue
        options = {o.split("=")[0] for o in (fields[5] + "," + tail[2]).split(",")}
        mounts.append(Mount(_unescape(fields[4]), tail[0], frozenset(options)))
    return mounts


def mount_of(path: str, mounts: Sequence[Mount]) -> Mount:
    """Return the mount holding ``path`` (the longest mount point above it; the last one wins)."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        below = path == point or path.startswith(point.rstrip("/") + "/")
        if below and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    if best is None:
        raise QuotaError(f"no mount holds {path} in {MOUNTINFO}")
    return best


def choose_backend(mount: Mount, home_inode: int) -> QuotaBackend:
    """Return the backend a home on ``mount`` (its root's inode ``home_inode``) can use (pure)."""
    options, point = mount.options, mount.point
    if mount.fstype == "xfs" and options & _XFS_PROJECT:
        return QuotaBackend("xfs-project", point)
    if mount.fstype == "xfs" and options & _XFS_USER:
        return QuotaBackend("xfs-user", point)
    if mount.fstype in ("ext2", "ext3", "ext4") and (options & _EXT_USER or "usrjquota" in options):
        return QuotaBackend("ext4-user", point)
    if mount.fstype == "btrfs":
        if home_inode != BTRFS_SUBVOLUME_INODE:
            return QuotaBackend(
                None, point, "the home is a plain folder on btrfs, not a subvolume of its own"
            )
        return QuotaBackend("btrfs-qgroup", point)
    if mount.fstype in ("xfs", "ext2", "ext3", "ext4"):
        return QuotaBackend(
            None, point, f"{mount.fstype} mounted without user or project quotas (mount options)"
        )
    return QuotaBackend(None, point, f"{mount.fstype} has no per-user quota coursehub can set")


def detect_backend(home: str | os.PathLike[str], mountinfo: str | None = None) -> QuotaBackend:
    """Return what the file system of the existing folder ``home`` offers.

    Raises
    ------
    QuotaError
        If ``home`` is not a folder or no mount holds it.
    """
    path = os.path.realpath(home)
    if not os.path.isdir(path):
        raise QuotaError(f"home {home} is not a folder")
    text = MOUNTINFO.read_text() if mountinfo is None else mountinfo
    return choose_backend(mount_of(path, parse_mountinfo(text)), os.stat(path).st_ino)


def plan_limit(
    backend: QuotaBackend, user: str, uid: int, home: str, limit_bytes: int | None
) -> list[list[str]]:
    """Return the commands that set ``user``'s limit (None: no limit) on ``home`` (pure).

    Raises
    ------
    QuotaError
        If ``backend`` has no kind (its reason is the message).
    """
    hard = 0 if limit_bytes is None else int(limit_bytes)
    mount = backend.mount
    if backend.kind == "xfs-project":
        return [
            ["xfs_quota", "-x", "-c", f"project -s -p {home} {uid}", mount],
            ["xfs_quota", "-x", "-c", f"limit -p bhard={hard} {uid}", mount],
        ]
    if backend.kind == "xfs-user":
        return [["xfs_quota", "-x", "-c", f"limit -u bhard={hard} {user}", mount]]
    if backend.kind == "ext4-user":
        kib = -(-hard // 1024)  # setquota counts 1 KiB blocks: round up
        return [["setquota", "-u", user, "0", str(kib), "0", "0", mount]]
    if backend.kind == "btrfs-qgroup":
        return [["btrfs", "qgroup", "limit", "none" if limit_bytes is None else str(hard), home]]
    raise QuotaError(f"no quota for {home}: {backend.reason}")


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def run_commands(
    commands: Sequence[Sequence[str]], what: str, run: Runner = subprocess.run
) -> None:
    """Run ``commands`` in order; the first that fails stops with its own message.

    Raises
    ------
    QuotaError
        ``"<what>: <command> failed: <its last line of stderr>"``, also for a
        tool that is not installed.
    """
    for command in commands:
        try:
            done = run(list(command), capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise QuotaError(f"{what}: {command[0]} is not installed") from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout or "").strip().splitlines() or ["no message"]
            raise QuotaError(f"{what}: {' '.join(command[:3])} failed: {lines[-1]}")


def apply_limit(
    home: str, user: str, limit_bytes: int | None, run: Runner = subprocess.run
) -> QuotaBackend:
    """Detect the backend of ``home`` and set ``user``'s limit there; return the backend.

    Raises
    ------
    QuotaError
        If the file system offers no quota (the reason) or a command fails.
    """
    import pwd

    backend = detect_backend(home)
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        uid = os.stat(home).st_uid  # no account (a demo home): the home's owner
    commands = plan_limit(backend, user, uid, os.path.realpath(home), limit_bytes)
    run_commands(commands, f"setting the home quota of {user} on {home}", run)
    return backend
