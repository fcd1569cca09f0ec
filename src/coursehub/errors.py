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


class StorageFullError(CoursehubError):
    """A write refused because the disk or the user's quota is full (ENOSPC, EDQUOT).

    The message names the file and what was kept (the previous version of it).
    """


def is_storage_full(exc: BaseException) -> bool:
    """Whether ``exc`` is an OSError of a full disk or quota (:data:`STORAGE_FULL_ERRNOS`)."""
    return isinstance(exc, OSError) and exc.errno in STORAGE_FULL_ERRNOS


def storage_full_kind(exc: OSError) -> str:
    """Return ``"quota exceeded"`` for EDQUOT, else ``"disk full"``."""
    return "quota exceeded" if exc.errno == errno.EDQUOT else "disk full"


def describe_storage_full(exc: OSError) -> str:
    """Return the one line of a full disk or quota: ``"disk full: cannot write /x (...)..."``."""
    what = storage_full_kind(exc)
    where = f" {exc.filename}" if exc.filename else ""
    return f"{what}: cannot write{where} ({exc.strerror or exc}): free some space and try again"
