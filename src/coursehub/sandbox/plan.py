"""One plan for every sandboxed job: build it for this host, check it works, start the command.

Every caller (autograde kernels, course book builds, course environment
builds) goes through :func:`make_plan` and
:func:`coursehub.sandbox.command.plan_sandbox_command`, so that the
account, the environment allow-list, the hidden and exposed folders and the
network are decided in one place.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from coursehub.sandbox.account import (
    SandboxAccount,
    ensure_sandbox_account,
    find_sandbox_account,
    sandbox_user_name,
)
from coursehub.sandbox.command import SandboxPlan, gpu_devices, sandbox_mode
from coursehub.sandbox.folders import hidden_paths, is_folder, plan_exposures, plan_private

#: The shared folders every sandboxed job gets a private, empty one of (systemd's
#: ``PrivateTmp=`` covers the first two: systemd.exec(5)), with the name of its folder.
PRIVATE_TARGETS = (("tmp", "/tmp"), ("var-tmp", "/var/tmp"), ("shm", "/dev/shm"))


def interpreter_paths() -> list[str]:
    """Return the folders this Python needs to run: its prefixes and its import path (sorted).

    ``sys.prefix`` (a virtualenv), ``sys.base_prefix``, the interpreter's own
    folder and the folders of ``sys.path`` that the installation put there
    (the standard library, site-packages, an editable install's source
    folder such as ``/root/coursehub/src``, ``PYTHONPATH``). Left out: the
    script's folder or working directory that Python puts first
    (``sys.path[0]``, unless ``-P``/``sys.flags.safe_path``), which for an
    autograde job is the course directory, the working directory itself, and
    zip or missing entries.
    """
    entries = sys.path if sys.flags.safe_path else sys.path[1:]
    cwd = Path.cwd().resolve()
    folders = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent)}
    folders |= {
        entry for entry in entries if entry and is_folder(entry) and Path(entry).resolve() != cwd
    }
    return sorted(str(Path(f).resolve()) for f in folders)


def sandbox_account(mode: str, name: str = "") -> SandboxAccount | None:
    """Return the sandbox account for ``mode`` (``root``/``uid``), creating it as root; else None.

    Raises
    ------
    CoursehubError
        If the account is missing and cannot be created (not root), or is root.
    """
    if mode not in ("root", "uid"):
        return None
    name = name or sandbox_user_name()
    account = find_sandbox_account(name)
    if account is not None and account.uid != 0 and account.gid != 0:
        return account
    return ensure_sandbox_account(name)


def make_plan(
    hidden: Iterable[str | Path] = (),
    *,
    keep: Iterable[str | Path] = (),
    needed: Iterable[str | Path] | None = None,
    network: bool = False,
    stage_dir: str | Path = "",
    account_name: str = "",
    mode: str | None = None,
    pid_namespace: bool = True,
    writable: Iterable[str | Path] = (),
    private_dir: str | Path | None = None,
) -> SandboxPlan:
    """Return the sandbox plan of one job on this host.

    Parameters
    ----------
    hidden
        Folders the job must not see (missing ones are ignored; nested ones
        are hidden once, outermost).
    keep
        Folders the job works in (its private copy): never hidden.
    needed
        Folders the job must read (default :func:`interpreter_paths`):
        exposed read-only where the account cannot enter them.
    network
        Whether the job keeps the network (a ``pip install``).
    stage_dir
        A folder of the job's own, outside the covered ones (root mode with
        exposures).
    account_name
        The sandbox account (default ``$COURSEHUB_GRADER_USER``).
    mode
        Force a mode of :data:`coursehub.sandbox.command.MODES` (default:
        :func:`coursehub.sandbox.command.sandbox_mode`).
    pid_namespace
        Give the job its own PID namespace
        (:attr:`~coursehub.sandbox.command.SandboxPlan.pid_namespace`).
    writable
        Folders the job writes in place (a formgrader's course directory):
        never hidden, exposed writable where the account cannot enter them.
    private_dir
        A folder of the job's own (outside ``hidden``) in which to make its
        private ``/tmp``, ``/var/tmp`` and ``/dev/shm``
        (:func:`private_folders`), bound over the shared ones with the
        folders of ``needed``, ``keep`` and ``writable`` below them shown
        again (:func:`~coursehub.sandbox.folders.plan_private`; root and
        userns modes): nothing one job leaves there is seen by the next.

    Raises
    ------
    CoursehubError
        If the sandbox account cannot be had (:func:`sandbox_account`).
    """
    mode = mode or sandbox_mode()
    account = sandbox_account(mode, account_name)
    needed = interpreter_paths() if needed is None else [str(p) for p in needed]
    writable = [str(p) for p in writable]
    keep_all = [*keep, *needed, *writable]
    namespaces = mode in ("root", "userns")
    privates = []
    if namespaces and private_dir is not None:
        private = private_folders(Path(private_dir), account)
        privates = plan_private(private, keep_all, [*keep, *writable])
    exposures = plan_exposures(needed, account, writable) if mode == "root" and account else []
    # an exposure under a private folder is shown in it already
    exposures = [
        e for e in exposures if not any(Path(p.cover) in Path(e.cover).parents for p in privates)
    ]
    exposures += privates
    covered = [e.cover for e in exposures]
    shown = [path for e in exposures for path in e.paths]
    hide = hidden_paths(hidden, keep_all, covered, shown) if namespaces else []
    devices = gpu_devices() if mode in ("root", "userns") else []
    return SandboxPlan(
        mode=mode,
        account=account,
        hidden=tuple(hide),
        exposures=tuple(exposures),
        devices=tuple(devices),
        network=network,
        stage_dir=str(stage_dir) if exposures else "",
        pid_namespace=pid_namespace,
    )


def private_folders(folder: Path, account: SandboxAccount | None) -> list[tuple[str, str]]:
    """Make a job's private ``/tmp``, ``/var/tmp`` and ``/dev/shm`` in ``folder``; return the pairs.

    The ``(folder, target)`` pairs of :data:`PRIVATE_TARGETS` for
    :func:`make_plan` (``private_dir``): each a new empty folder (mode 0700) in
    ``folder``, the sandbox account's where there is one, for the targets
    this host has.
    """
    from coursehub.sandbox.command import chown_tree

    pairs = []
    for name, target in PRIVATE_TARGETS:
        if not Path(target).is_dir():
            continue
        (folder / f"private-{name}").mkdir(mode=0o700)
        if account is not None:
            chown_tree(folder / f"private-{name}", account.uid, account.gid)
        pairs.append((str(folder / f"private-{name}"), target))
    return pairs
