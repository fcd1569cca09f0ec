"""``coursehub accounts sync`` on the host: read the accounts and groups, apply a plan (root).

Commands (Debian package ``passwd``): ``useradd`` (useradd(8)) with
``--create-home``, ``--user-group``, ``--shell /bin/bash``, ``--comment``
:data:`coursehub.accounts.plan.ACCOUNT_COMMENT` and ``-K HOME_MODE=0700``
(login.defs(5)); no ``--password``, so the password field is ``!``: locked,
no password login (shadow(5)); ``groupadd`` and ``gpasswd -M`` (gpasswd(1))
for the course groups, as :func:`coursehub.coursedata.folders.ensure_group`.
Nothing here deletes an account or a home.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import subprocess

from coursehub.accounts.plan import ACCOUNT_COMMENT, AccountPlan, HostAccount
from coursehub.errors import CoursehubError

#: Mode of a home coursehub creates: its owner only.
HOME_MODE = 0o700


class AccountError(CoursehubError):
    """An account or group command failed, or the sync was not run as root."""


def _home_mode(home: str) -> int | None:
    try:
        return stat.S_IMODE(os.stat(home).st_mode)
    except OSError:
        return None


def read_accounts() -> dict[str, HostAccount]:
    """Return every account of the host's user database (``getpwall``) by name."""
    return {
        p.pw_name: HostAccount(
            uid=p.pw_uid,
            comment=p.pw_gecos,
            home=p.pw_dir,
            home_mode=_home_mode(p.pw_dir) if p.pw_gecos == ACCOUNT_COMMENT else None,
        )
        for p in pwd.getpwall()
    }


def read_groups() -> dict[str, tuple[str, ...]]:
    """Return every group of the host (``getgrall``) with its listed members, by name."""
    return {g.gr_name: tuple(g.gr_mem) for g in grp.getgrall()}


def _run(argv: list[str]) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise AccountError(f"{argv[0]} is not installed (Debian: apt-get install passwd)") from exc
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise AccountError(
            f"{' '.join(argv[:-1])} {argv[-1]} failed: {detail[-1] if detail else exc}"
        ) from exc


def create_account(name: str) -> None:
    """Create ``name``: own group, locked password, home 0700 (checked after ``useradd``).

    Raises
    ------
    AccountError
        If ``useradd`` fails (the message names the account).
    """
    _run(
        [
            "useradd",
            "--create-home",
            "--user-group",
            "--shell",
            "/bin/bash",
            "--comment",
            ACCOUNT_COMMENT,
            "-K",
            f"HOME_MODE={HOME_MODE:04o}",
            name,
        ]
    )
    os.chmod(pwd.getpwnam(name).pw_dir, HOME_MODE)


def apply_plan(plan: AccountPlan) -> None:
    """Carry out ``plan``: accounts first, then homes, then the course groups.

    Raises
    ------
    AccountError
        When not root, or when a command fails (the message names the
        command and the account or group); the steps before it stay done.
    """
    if not plan.changes:
        return
    if os.geteuid() != 0:
        raise AccountError("creating Unix accounts and groups needs root")
    for name in plan.create:
        create_account(name)
    for name in plan.private_homes:
        os.chmod(pwd.getpwnam(name).pw_dir, HOME_MODE)
    for change in plan.groups:
        if change.create:
            _run(["groupadd", change.group])
        _run(["gpasswd", "-M", ",".join(change.members), change.group])
