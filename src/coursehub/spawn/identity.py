"""The hub's identity on its host: a short id that every host-wide name of a hub carries.

Several hubs may run on one host (production, a ``coursehub demo``, a test
suite run as root), with the same usernames. Whatever a hub names outside
its own data directory (cgroups, systemd units, GPU assignments, lock files)
carries its hub id, so that one hub never finds, reuses or kills another's.

The id is a hash of what makes a hub itself: its database
(``JupyterHub.db_url``, a relative SQLite path resolved against the hub's
working directory as JupyterHub does, the password left out). Two hubs that
share a database are the same hub. :class:`HubLock` makes sure that no two
live processes act as the same hub on one host.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from pathlib import Path
from typing import IO, Any, ClassVar

from coursehub.contract import hub_id_for_db_url
from coursehub.errors import CoursehubError

__all__ = [
    "HubIdentityError",
    "HubLock",
    "check_hub_id",
    "hub_id_from_config",
]

#: What a hub id may be made of (it goes into cgroup, unit and file names).
HUB_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,40}")


class HubIdentityError(CoursehubError):
    """Two hubs would share host-wide names, or a hub id is malformed."""


def hub_id_from_config(config: Any, cwd: str | None = None) -> str:
    """Return the hub id from a traitlets config (``config.JupyterHub.db_url``, if set)."""
    db_url = None
    with contextlib.suppress(AttributeError, KeyError, TypeError):
        db_url = config.get("JupyterHub", {}).get("db_url")
    return hub_id_for_db_url(str(db_url) if db_url else None, cwd)


def check_hub_id(hub_id: str) -> str:
    """Return ``hub_id`` if it is 1-40 letters, digits, ``.``, ``_`` or ``-``.

    Raises
    ------
    HubIdentityError
        Otherwise (the message names the value).
    """
    if not HUB_ID_PATTERN.fullmatch(hub_id):
        raise HubIdentityError(
            f"hub id {hub_id!r} must be 1-40 letters, digits, '.', '_' or '-' "
            "(it goes into cgroup, systemd unit and lock file names)"
        )
    return hub_id


def default_runtime_dir() -> str:
    """Return where host-wide lock files go: ``/run/coursehub`` as root, else a per-uid temp dir."""
    if os.geteuid() == 0 and os.access("/run", os.W_OK):
        return "/run/coursehub"
    return os.path.join(tempfile.gettempdir(), f"coursehub-{os.geteuid()}")


class HubLock:
    """An exclusive ``flock`` on ``RUNTIME_DIR/hub-<hub_id>.lock``, held while this process lives.

    Taken once per process and hub id (:meth:`acquire` is idempotent); the
    kernel drops it when the process exits, so a crashed hub never blocks its
    successor.
    """

    _held: ClassVar[dict[str, IO[str]]] = {}

    @classmethod
    def acquire(cls, hub_id: str, runtime_dir: str | os.PathLike[str]) -> Path:
        """Take the lock of ``hub_id`` for this process; return the lock file.

        Raises
        ------
        HubIdentityError
            If another live process holds it: two hubs with the same id on one host.
        """
        path = Path(runtime_dir) / f"hub-{check_hub_id(hub_id)}.lock"
        if str(path) in cls._held:
            return path
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115  (held open for the process's life)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise HubIdentityError(
                f"another hub with hub id {hub_id!r} is running on this host (pid {holder}, "
                f"lock {path}): give each hub its own database/data directory or its own "
                "Spawner hub_id"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        cls._held[str(path)] = handle
        return path
