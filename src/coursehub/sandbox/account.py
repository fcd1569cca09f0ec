"""The unprivileged Unix account that runs sandboxed jobs when coursehub runs as root."""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from coursehub.errors import CoursehubError

#: The sandbox account's default name; ``COURSEHUB_GRADER_USER`` overrides it.
DEFAULT_SANDBOX_USER = "coursehub-grader"
#: Environment variable naming the sandbox account.
SANDBOX_USER_VAR = "COURSEHUB_GRADER_USER"

#: Most tasks (processes and threads) the sandbox account may have at once, all its jobs
#: together (``RLIMIT_NPROC``, getrlimit(2); counted per real uid, set by ``prlimit``).
#: A kernel with its BLAS threads uses a few dozen.
SANDBOX_MAX_TASKS = 1024


@dataclass(frozen=True)
class SandboxAccount:
    """The Unix account that runs sandboxed jobs: name, uid, gid."""

    name: str
    uid: int
    gid: int


def sandbox_user_name(environ: Mapping[str, str] | None = None) -> str:
    """Return ``$COURSEHUB_GRADER_USER`` or :data:`DEFAULT_SANDBOX_USER`."""
    env = os.environ if environ is None else environ
    return env.get(SANDBOX_USER_VAR) or DEFAULT_SANDBOX_USER


def plan_useradd(name: str) -> list[str]:
    """Return the command creating the sandbox account (pure).

    A system account (``useradd --system``, uid below ``UID_MIN`` of
    ``/etc/login.defs``) with its own group, no home directory and no login
    shell: it only ever runs jobs started by coursehub.
    """
    return [
        "useradd",
        "--system",
        "--user-group",
        "--no-create-home",
        "--home-dir",
        "/nonexistent",
        "--shell",
        "/usr/sbin/nologin",
        name,
    ]


def find_sandbox_account(name: str) -> SandboxAccount | None:
    """Return the account ``name`` from the password database, or None."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return SandboxAccount(name, entry.pw_uid, entry.pw_gid)


def ensure_sandbox_account(name: str | None = None) -> SandboxAccount:
    """Return the sandbox account, creating it (as root) when it does not exist yet.

    Raises
    ------
    CoursehubError
        If it does not exist and cannot be created, or if it is root.
    """
    name = name or sandbox_user_name()
    account = find_sandbox_account(name)
    if account is None:
        try:
            subprocess.run(plan_useradd(name), check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            raise CoursehubError(
                f"cannot create the sandbox account {name!r} ({detail.strip()}); "
                f"as root run: {' '.join(plan_useradd(name))}"
            ) from exc
        account = find_sandbox_account(name)
    if account is None or account.uid == 0 or account.gid == 0:
        raise CoursehubError(f"sandbox account {name!r} must exist and must not be root")
    return account
