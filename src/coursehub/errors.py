"""Errors that users can meet, shown by the CLI and the web app without a traceback."""

import errno


class CoursehubError(Exception):
    """A problem caused by the user's input or environment, with a message that says what to fix.

    The command line prints ``coursehub: error: <message>`` and exits with
    status 2; nothing on disk has been changed when it is raised.
    """


class UsageError(CoursehubError):
    """A command-line argument, file or parameter that is out of range or malformed."""


#: ``errno`` values of a write refused for want of space: the disk, or the user's quota.
STORAGE_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: ``errno`` values of a write the storage refuses whatever the program does: full (disk or
#: quota) or mounted read-only (errno(3): ENOSPC, EDQUOT, EROFS).
STORAGE_REFUSED_ERRNOS = STORAGE_FULL_ERRNOS | {errno.EROFS}


class StorageFullError(CoursehubError):
    """A write the storage refused: disk or quota full, read-only (:data:`STORAGE_REFUSED_ERRNOS`).

    The message names the file and what was kept (the previous version of it).
    """


def is_storage_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is an OSError of :data:`STORAGE_REFUSED_ERRNOS` (full, quota, read-only)."""
    return isinstance(exc, OSError) and exc.errno in STORAGE_REFUSED_ERRNOS


def storage_full_kind(exc: OSError) -> str:
    """Return ``"quota exceeded"``, ``"read-only file system"`` or ``"disk full"`` for ``exc``."""
    if exc.errno == errno.EDQUOT:
        return "quota exceeded"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    return "disk full"


def storage_hint(exc: OSError) -> str:
    """Return what to do about ``exc``: free space, or write somewhere writable."""
    if exc.errno == errno.EROFS:
        return "write to a folder on a writable file system"
    return "free some space"


def describe_storage_full(exc: OSError) -> str:
    """Return the one line of a refused write: ``"disk full: cannot write /x (...)..."``."""
    what = storage_full_kind(exc)
    where = f" {exc.filename}" if exc.filename else ""
    return f"{what}: cannot write{where} ({exc.strerror or exc}): {storage_hint(exc)} and try again"
