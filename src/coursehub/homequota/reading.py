"""How much a home uses, and its limit, as its file system's quota counts them.

One command per backend (:func:`plan_usage_read`, pure), one parse of its
answer per tool (pure, tested on sample output), and :func:`read_usage`,
which runs the command. Every reading is ``(bytes used, limit bytes or
None)``; a user's or project's id is the home owner's uid (the project id
:func:`coursehub.homequota.fs.plan_limit` gives a home).

* ``btrfs-qgroup``: ``btrfs qgroup show -re --raw -f HOME`` (btrfs-qgroup(8)):
  rows ``qgroupid rfer excl max_rfer max_excl``, bytes, ``none`` for no limit;
* ``ext4-user``: ``quota -u -v -w -p --show-mntpoint --hide-device UID``
  (quota(1), quota-tools ``quota.c``, ``showquotas``): one line per file
  system, the mount point then ``blocks quota limit grace files quota limit
  grace``, space in 1 KiB blocks, ``*`` glued to a count past its soft limit;
  ``-w`` keeps a long mount point on the line of its figures, ``-p`` prints
  the grace as a number, ``-v`` lists a file system where nothing is used
  yet; the exit status is 1 for a user over a limit;
* ``xfs-user``, ``xfs-project``: ``xfs_quota -c 'quota -u|-p -b -N -n -v ID'
  MOUNT`` (xfs_quota(8), xfsprogs ``quota/quota.c``, ``quota_mount``): per file
  system ``DEVICE BLOCKS QUOTA LIMIT WARNS TIMER... MOUNT``, 1 KiB blocks
  (-b: blocks only; -N: no header; -n: ids not looked up; -v: even when
  nothing is used); a device name longer than 19 characters puts the
  figures on the next line. ``quota`` is not an expert command: no ``-x``,
  so a student can read their own.

A zero hard limit with a soft one reports the soft one; none at all, None.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from coursehub.homequota.fs import QuotaBackend, QuotaError, Runner

#: Backends whose usage :func:`read_usage` reads.
USAGE_READABLE = ("xfs-project", "xfs-user", "ext4-user", "btrfs-qgroup")
KIB = 1024


def plan_usage_read(backend: QuotaBackend, home: str, uid: int) -> list[str]:
    """Return the command that reads the usage of ``home`` (owner ``uid``) on ``backend`` (pure).

    Raises
    ------
    QuotaError
        For a backend without a reading (its kind, or its reason when it has none).
    """
    if backend.kind == "btrfs-qgroup":
        return ["btrfs", "qgroup", "show", "-re", "--raw", "-f", home]
    if backend.kind == "ext4-user":
        return ["quota", "-u", "-v", "-w", "-p", "--show-mntpoint", "--hide-device", str(uid)]
    if backend.kind in ("xfs-user", "xfs-project"):
        kind = "-p" if backend.kind == "xfs-project" else "-u"
        return ["xfs_quota", "-c", f"quota {kind} -b -N -n -v {uid}", backend.mount]
    what = backend.kind or backend.reason
    raise QuotaError(f"reading the home quota of {home}: no usage reading for {what}")


def _limit(soft_kib: int, hard_kib: int) -> int | None:
    kib = hard_kib or soft_kib
    return kib * KIB if kib else None


def parse_btrfs_qgroup(text: str) -> tuple[int, int | None] | None:
    """Return ``(referenced bytes, max_rfer or None)`` of the last qgroup row (pure).

    None when ``text`` has no ``LEVEL/ID`` row.
    """
    rows = [line.split() for line in text.splitlines() if line[:1].isdigit() and "/" in line]
    rows = [row for row in rows if len(row) >= 4 and row[0].replace("/", "").isdigit()]
    if not rows:
        return None
    row = rows[-1]
    return int(row[1]), None if row[3] == "none" else int(row[3])


def parse_quota_report(text: str, mount: str) -> tuple[int, int | None] | None:
    """Return ``(bytes used, limit)`` of ``mount``'s line in quota(1)'s report (pure).

    ``text`` is the output of ``quota -v -w -p --show-mntpoint --hide-device``
    (module docstring); None when no line is for ``mount``.
    """
    for line in text.splitlines():
        fields = line.strip()
        if not fields.startswith(mount + " "):
            continue
        figures = fields[len(mount) :].split()
        if len(figures) < 3:
            continue
        used, soft, hard = (int(value.rstrip("*")) for value in figures[:3])
        return used * KIB, _limit(soft, hard)
    return None


def parse_xfs_quota_report(text: str, mount: str) -> tuple[int, int | None] | None:
    """Return ``(bytes used, limit)`` of ``mount`` in ``xfs_quota -c 'quota -b -N -v'`` (pure).

    A device name too long for its column puts the figures on their own line
    (module docstring); None when no line ends with ``mount``.
    """
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.rstrip().endswith(" " + mount):
            continue
        fields = line.split()
        if not fields[0].isdigit():  # the device, on this line
            fields = fields[1:]
        elif index and len(lines[index - 1].split()) != 1:
            continue
        if len(fields) >= 3 and all(value.isdigit() for value in fields[:3]):
            used, soft, hard = (int(value) for value in fields[:3])
            return used * KIB, _limit(soft, hard)
    return None


def parse_usage(backend: QuotaBackend, text: str) -> tuple[int, int | None] | None:
    """Return the reading in ``text``, the output of :func:`plan_usage_read`'s command (pure)."""
    if backend.kind == "btrfs-qgroup":
        return parse_btrfs_qgroup(text)
    if backend.kind == "ext4-user":
        return parse_quota_report(text, backend.mount)
    return parse_xfs_quota_report(text, backend.mount)


def read_usage(
    backend: QuotaBackend, home: str, run: Runner = subprocess.run, uid: int | None = None
) -> tuple[int, int | None]:
    """Run the reading of ``home`` on ``backend``; return ``(bytes used, limit or None)``.

    ``uid`` defaults to the owner of ``home``. quota(1) exits with 1 for a
    user past a limit: a report with the home's line is read whatever the status.

    Raises
    ------
    QuotaError
        For a backend without a reading, a missing tool, or an answer without
        the home's line (the tool's last line of error).
    """
    owner = os.stat(home).st_uid if uid is None else uid
    command: Sequence[str] = plan_usage_read(backend, home, owner)
    try:
        done = run(list(command), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise QuotaError(
            f"reading the home quota of {home}: {command[0]} is not installed"
        ) from None
    found = parse_usage(backend, done.stdout or "")
    if found is None:
        lines = (done.stderr or "").strip().splitlines() or [f"no quota for {backend.mount}"]
        raise QuotaError(f"reading the home quota of {home}: {lines[-1]}")
    return found


def read_home_usage(
    backend: QuotaBackend, home: str, run: Runner = subprocess.run
) -> tuple[int, int | None]:
    """Return ``(bytes used, limit bytes or None)`` of ``home`` as its file system counts them.

    The user or project is the home's owner (:func:`read_usage`).

    Raises
    ------
    QuotaError
        For a home without a quota backend, or when the reading fails.
    """
    return read_usage(backend, home, run)


def read_btrfs_usage(home: str, run: Runner = subprocess.run) -> tuple[int, int | None]:
    """Return ``(referenced bytes, limit bytes or None)`` of a btrfs home subvolume.

    Raises
    ------
    QuotaError
        If the command fails or prints no row for the subvolume.
    """
    return read_usage(QuotaBackend("btrfs-qgroup", home), home, run)
