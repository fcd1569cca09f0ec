"""Usage read into the catalog on a schedule, by one ingester per hub.

``coursehub usage ingest --every S`` reads a hub's usage folder every ``S``
seconds (:func:`run_every`); the rendered hub configuration starts it as a
hub-managed service (``usage-ingest``, through
:func:`coursehub.spawn.hubservice.ends_with_hub`), so nobody has to remember a
cron line, in the demo as in production.

One ingester per hub: every ingest, one pass or a schedule, holds an
exclusive ``flock`` (flock(2)) on ``FOLDER/.ingest.lock`` while it reads
(:func:`ingest_lock`); a schedule holds it for its whole life. A second
ingest of the same folder is refused with the holder's pid, so two ingesters
never read the same new lines at once (each would apply them before the
other stored the new offset). The kernel drops the lock when its process
exits, so a killed ingester never blocks the next one.

A pass that fails (the catalog not reachable yet, not migrated, a folder
that cannot be listed) is reported on stderr and tried again at the next
one: JupyterHub restarts a managed service that exits, at once and forever.
SIGTERM (the hub stopping) ends the schedule after the pass in progress.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TypeVar

from coursehub.errors import UsageError

#: The lock file of a folder's ingester, inside the folder (not a usage file: not ``*.jsonl``).
LOCK_NAME = ".ingest.lock"

T = TypeVar("T")


@contextlib.contextmanager
def ingest_lock(folder: Path) -> Iterator[Path]:
    """Hold the ingest lock of ``folder`` for the block; yield the lock file.

    Raises
    ------
    UsageError
        If another live process holds it (the message names its pid), or the
        lock file cannot be opened.
    """
    path = Path(folder) / LOCK_NAME
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot open the ingest lock {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise UsageError(f"cannot lock {path}: {exc.strerror}") from None
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            raise UsageError(
                f"another `coursehub usage ingest` reads {folder} (pid {holder}, lock {path}): "
                "one ingester per hub (the hub's usage-ingest service, docs/usage.md)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        yield path
    finally:
        os.close(fd)


def run_every(
    every_s: float,
    one_pass: Callable[[], T],
    report: Callable[[T], None],
    complain: Callable[[str], None],
    stop: threading.Event,
) -> None:
    """Call ``one_pass`` now and then every ``every_s`` seconds until ``stop`` is set.

    Each outcome goes to ``report``; a pass that raises an error users can
    meet (:class:`coursehub.errors.CoursehubError`, ``OSError``, a database
    error) goes to ``complain`` as one line and the schedule goes on.
    """
    from sqlalchemy.exc import SQLAlchemyError

    from coursehub.errors import CoursehubError

    while not stop.is_set():
        try:
            report(one_pass())
        except (CoursehubError, OSError, SQLAlchemyError) as exc:
            complain(f"usage ingest failed, tried again in {every_s:g} s: {exc}")
        stop.wait(every_s)


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[threading.Event]:
    """Yield an event set by SIGTERM (the hub stopping its services); restore the handler after."""
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
