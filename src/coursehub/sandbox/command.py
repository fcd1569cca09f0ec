"""The command that starts a job inside the sandbox: account, namespaces, hidden and exposed paths.

What a sandboxed job gets depends on where coursehub runs (:func:`sandbox_mode`):

- **root** (the course app on a hub host): the job runs as the sandbox
  account (:mod:`coursehub.sandbox.account`) with no supplementary groups, no
  capabilities and ``no_new_privs`` (``setpriv``), in new mount and PID
  namespaces and, unless the plan allows the network, a new network
  namespace (``unshare``): no view of other processes, the plan's hidden
  folders covered by an empty, unreadable tmpfs, the GPU device files by
  ``/dev/null``, and at most :data:`~coursehub.sandbox.account.SANDBOX_MAX_TASKS`
  tasks for the account. Folders it needs but cannot enter (a virtualenv
  under ``/root``, mode 0700 on Debian) are exposed read-only at their own
  path over a tmpfs that hides the rest of that folder
  (:func:`~coursehub.sandbox.folders.plan_exposures`).
- **not root, user namespaces allowed** (a teacher's own server): the same
  namespaces inside an unprivileged user namespace, all capabilities dropped
  before the job's code starts; same uid.
- **uid** (root on a host without usable namespaces): only the account
  switch; nothing hidden, nothing exposed.
- **none** (not root, no user namespaces): unchanged; only the environment
  allow-list and a private working copy remain.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import CoursehubError
from coursehub.sandbox.account import SANDBOX_MAX_TASKS, SandboxAccount

#: Sandbox modes, strongest first (:func:`sandbox_mode`).
MODES = ("root", "userns", "uid", "none")

#: Device files of GPUs (NVIDIA's driver, the DRM render and card nodes of others).
GPU_DEVICE_PATTERNS = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/kfd")


@dataclass(frozen=True)
class Exposure:
    """A folder covered for the job, with the folders below it it needs shown again.

    ``cover``: the topmost folder on the way that the account cannot enter
    (covered by a tmpfs), or, with ``source``, a folder the job gets a
    private one of (``/tmp``: ``source`` is bind-mounted over it);
    ``paths``: the folders below it the job needs, bind-mounted at their own
    paths, read-only but for those also in ``writable`` (a formgrader's own
    course directory, the job's own folder).
    """

    cover: str
    paths: tuple[str, ...]
    writable: tuple[str, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class SandboxPlan:
    """Everything the sandbox applies to one job (see the module docstring).

    Parameters
    ----------
    mode
        One of :data:`MODES` (:func:`sandbox_mode`).
    account
        The sandbox account (``root`` and ``uid`` modes).
    hidden
        Existing folders covered by an empty tmpfs of mode 000 (outermost
        only: :func:`~coursehub.sandbox.folders.hidden_paths`).
    exposures
        Covered folders, with the paths shown again in them: under a tmpfs
        (:func:`~coursehub.sandbox.folders.plan_exposures`) or a private
        folder (:func:`~coursehub.sandbox.folders.plan_private`).
    devices
        Device files replaced by ``/dev/null`` (the GPUs).
    network
        Keep the host's network (no new network namespace).
    stage_dir
        A folder (created when missing) where exposed folders are
        bind-mounted before their covers are mounted (needed with
        ``exposures``); it may itself be covered: the script reaches it
        through its working directory.
    pid_namespace
        Give the job its own PID namespace (default). Without it (a
        long-lived server the hub stops with signals: a course's
        formgrader) the namespace shell execs the job, so the job
        gets the caller's signals itself; it still sees other processes,
        not what they hold (another uid).
    """

    mode: str
    account: SandboxAccount | None = None
    hidden: tuple[str, ...] = ()
    exposures: tuple[Exposure, ...] = ()
    devices: tuple[str, ...] = ()
    network: bool = False
    stage_dir: str = ""
    pid_namespace: bool = True


#: The shell that runs as root inside the new namespaces, before the account switch:
#: stage the exposed folders and the private ones (bind mounts in ``$STAGE/0``, ``1``...),
#: mount the covers (a tmpfs, or a staged private folder bound over its target), bind the
#: exposed stages into place read-only (the exposed folders come twice: staged, then
#: bound, each after ``ro`` or ``rw``), each stage unmounted once bound, hide the hidden
#: folders, replace the devices, then run the command. The stage is reached through the
#: working directory once the covers are on (``mount -c``: the relative path is not made
#: absolute again, which would resolve it under a cover; ``umount`` through
#: ``/proc/self/cwd``, which it does not resolve by name); the job then gets its own
#: working directory back by name (``/`` if it is no longer there). Bind, not ``mount
#: --move``: in a user namespace of an unprivileged user, util-linux's move fails after
#: the move itself (exit 32, "any subsequent operation failed").
_NAMESPACE_SCRIPT = (
    # the folders made on a cover lead to the exposed ones: open to the account whatever
    # the caller's umask (the demo's is 077), which the job gets back
    "u=$(umask); umask 022; w=$(pwd -P); "
    'n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do '
    'mkdir -p "$STAGE/$i" && mount --bind "$1" "$STAGE/$i" || exit 125; '
    "shift; i=$((i+1)); done; ns=$n; "
    'if [ "$ns" -gt 0 ]; then cd "$STAGE" || exit 125; fi; '
    'n=$1; shift; while [ "$n" -gt 0 ]; do '
    'if [ -n "$1" ]; then mount -c --bind "$1" "$2" && umount -c "/proc/self/cwd/$1"; '
    'else mount -t tmpfs -o size=64k,mode=755 coursehub-cover "$2"; fi || exit 125; '
    "shift 2; n=$((n-1)); done; "
    'n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do '
    'mkdir -p "$2" && mount -c --bind "$i" "$2" && umount -c "/proc/self/cwd/$i" '
    '&& { [ "$1" = rw ] || mount -o remount,bind,ro "$2"; } || exit 125; '
    "shift 2; i=$((i+1)); done; "
    'if [ "$ns" -gt 0 ]; then cd "$w" 2>/dev/null || cd /; fi; '
    'n=$1; shift; while [ "$n" -gt 0 ]; do '
    'mount -t tmpfs -o size=4k,mode=000 coursehub-hidden "$1" || exit 125; '
    "shift; n=$((n-1)); done; "
    'n=$1; shift; while [ "$n" -gt 0 ]; do '
    'mount --bind /dev/null "$1" || exit 125; '
    "shift; n=$((n-1)); done; "
    'umask "$u"; '
)
#: The script's last step: run the job as a child of ``sh`` (PID 1 of a new PID namespace).
_RUN_CHILD = '"$@"'
#: The last step without a PID namespace: become the job (it gets the caller's signals).
_RUN_EXEC = 'exec "$@"'


def plan_sandbox_command(cmd: Sequence[str], plan: SandboxPlan) -> list[str]:
    """Return the command that starts ``cmd`` inside the sandbox of ``plan`` (pure).

    Raises
    ------
    ValueError
        If ``root`` or ``uid`` mode has no account, or ``exposures`` no ``stage_dir``.

    Notes
    -----
    With the sandbox account the job also gets ``RLIMIT_NPROC`` =
    :data:`~coursehub.sandbox.account.SANDBOX_MAX_TASKS` (``prlimit``), so
    that a fork bomb cannot use up the host's process ids.

    A kernel's parent poller (ipykernel, ``JPY_PARENT_PID``) cannot see its
    parent from inside a PID namespace: such a job is started
    ``independent`` and ``setpriv --pdeathsig=KILL`` ties it to its parent
    instead. ``unshare --fork --pid`` makes ``sh`` PID 1 of the new
    namespace; it runs the job as its child (so SIGINT, a kernel interrupt,
    reaches it: a namespace's PID 1 ignores signals it has no handler for),
    and when it exits Linux kills whatever the job left behind
    (pid_namespaces(7)). ``unshare`` ignores SIGINT and SIGTERM while it
    waits (util-linux unshare(1)). ``mount --bind`` and the read-only
    remount of a bind mount: mount(8).
    """
    mode = plan.mode
    if mode == "none":
        return list(cmd)
    if mode in ("root", "uid") and plan.account is None:
        raise ValueError(f"{mode} mode needs the sandbox account")
    if plan.exposures and not plan.stage_dir:
        raise ValueError("exposed paths need a stage folder")
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    if mode in ("root", "uid"):
        assert plan.account is not None
        account = plan.account
        drop += [f"--reuid={account.uid}", f"--regid={account.gid}", "--clear-groups"]
        # a fork bomb stops at the sandbox account's task limit, not at the host's pid_max
        drop[:0] = ["prlimit", f"--nproc={SANDBOX_MAX_TASKS}", "--"]
    if mode == "uid":
        return [*drop, "--", *cmd]
    # setpriv --pdeathsig: unshare (then, --kill-child, the whole namespace) dies with the parent
    unshare = ["setpriv", "--pdeathsig=KILL", "--", "unshare"]
    if mode == "userns":
        unshare += ["--user", "--map-root-user"]
    if not plan.network:
        unshare.append("--net")
    unshare.append("--mount")
    if plan.pid_namespace:
        unshare += ["--pid", "--fork", "--kill-child", "--mount-proc"]
    script = _NAMESPACE_SCRIPT + (_RUN_CHILD if plan.pid_namespace else _RUN_EXEC)
    exposed = [path for exposure in plan.exposures for path in exposure.paths]
    sources = [exposure.source for exposure in plan.exposures if exposure.source]
    writable = {path for exposure in plan.exposures for path in exposure.writable}
    moves = [item for path in exposed for item in ("rw" if path in writable else "ro", path)]
    covers: list[str] = []
    for exposure in plan.exposures:
        stage = str(len(exposed) + sources.index(exposure.source)) if exposure.source else ""
        covers += [stage, exposure.cover]
    return [
        *unshare,
        "--",
        "/usr/bin/env",
        f"STAGE={plan.stage_dir}",
        "/bin/sh",
        "-c",
        script,
        "coursehub-sandbox",
        str(len(exposed) + len(sources)),
        *exposed,
        *sources,
        str(len(plan.exposures)),
        *covers,
        str(len(exposed)),
        *moves,
        str(len(plan.hidden)),
        *plan.hidden,
        str(len(plan.devices)),
        *plan.devices,
        *drop,
        "--",
        *cmd,
    ]


@functools.lru_cache(maxsize=4)
def sandbox_mode(is_root: bool | None = None) -> str:
    """Return the strongest mode of :func:`plan_sandbox_command` this host allows.

    Root: ``"root"`` where the namespaces work, else ``"uid"``; otherwise
    ``"userns"`` where unprivileged user namespaces work, else ``"none"``.
    Tries the command once with ``true``.

    Raises
    ------
    CoursehubError
        As root, if ``setpriv`` (util-linux) is missing.
    """
    is_root = os.geteuid() == 0 if is_root is None else is_root
    mode = "root" if is_root else "userns"
    fallback = "uid" if is_root else "none"
    if not shutil.which("setpriv"):
        if is_root:
            raise CoursehubError("setpriv (util-linux) is needed to run sandboxed jobs as root")
        return "none"
    if not shutil.which("unshare"):
        return fallback
    nobody = SandboxAccount("nobody", 65534, 65534)  # any non-root ids do for the probe
    probe = plan_sandbox_command(["true"], SandboxPlan(mode, nobody if is_root else None))
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return mode if ok else fallback


def gpu_devices(patterns: Iterable[str] = GPU_DEVICE_PATTERNS) -> list[str]:
    """Return the GPU device files (character devices) present on this host, sorted."""
    import glob

    found = set()
    for pattern in patterns:
        for path in glob.glob(pattern):
            with contextlib.suppress(OSError):
                if stat.S_ISCHR(os.stat(path).st_mode):
                    found.add(path)
    return sorted(found)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """``chown -R uid:gid root`` without following symbolic links."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)
