"""Small file systems on loop devices for the home-disk tests (root only).

:func:`loop_mount` makes an image file, formats it (``mkfs.ext4 -m 0``: no
blocks reserved for root, so root fills it too; or ``mkfs.btrfs``), mounts
it with ``mount -o loop`` and unmounts and deletes it afterwards. Skips the
test, with the reason, when not root or when the tools or the kernel's file
system are missing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

MKFS = {
    "ext4": ["mkfs.ext4", "-q", "-F", "-m", "0"],
    "btrfs": ["mkfs.btrfs", "-q", "-f"],
}


def _filesystems() -> set[str]:
    with open("/proc/filesystems") as handle:
        return {line.split()[-1] for line in handle if line.strip()}


@contextlib.contextmanager
def loop_mount(workdir: Path, size_mib: int, fstype: str = "ext4") -> Iterator[Path]:
    """Mount a fresh ``fstype`` of ``size_mib`` MiB at ``workdir/mnt``; yield the mount point."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a loop device")
    if shutil.which(MKFS[fstype][0]) is None:
        pytest.skip(f"{MKFS[fstype][0]} not found (apt-get install btrfs-progs / e2fsprogs)")
    if fstype not in _filesystems():
        pytest.skip(f"this kernel has no {fstype} file system")
    image, mount = workdir / f"{fstype}.img", workdir / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(size_mib * 2**20)
    subprocess.run([*MKFS[fstype], str(image)], check=True, capture_output=True)
    done = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True)
    if done.returncode != 0:
        image.unlink()
        pytest.skip(f"cannot mount a loop device: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        image.unlink(missing_ok=True)


def fill(folder: Path) -> int:
    """Write into ``folder`` until its file system refuses; return the bytes written.

    Big chunks first, then single bytes, then empty files until no inode is
    left either, so that nothing more fits.
    """
    written = 0
    for chunk, name in ((2**16, "fill.bin"), (1, "fill-tail.bin")):
        with contextlib.suppress(OSError), open(folder / name, "wb", buffering=0) as handle:
            while True:
                written += handle.write(b"\0" * chunk)
    for index in range(10_000):
        try:
            (folder / f"fill-{index}").touch()
        except OSError as exc:
            assert exc.errno in (errno.ENOSPC, errno.EDQUOT), exc
            break
    return written
