"""What a student's code may see while it is autograded: environment, Unix account, namespaces.

Autograding runs *somebody else's* code (jupyter/nbgrader#483). nbgrader
itself (``nbgrader autograde``: it copies the submission, sanitizes it,
writes the gradebook) is trusted; only the Jupyter kernel that executes the
student's cells is sandboxed (:mod:`coursehub.grading.sandbox_kernel`).
What the kernel gets depends on where autograding runs:

- **root** (the course app on a hub host): the kernel runs as the grading
  account (:data:`DEFAULT_GRADER_USER`, ``coursehub grading grader-user``,
  i.e. ``useradd --system``) with no supplementary groups, no capabilities
  and ``no_new_privs`` (``setpriv``), in new network, mount and PID
  namespaces (``unshare``): no network at all (only a down loopback), no
  view of other processes, and the courses root, the exchange, the runner's
  slots and the catalog's folder covered by an empty, unreadable tmpfs, the
  GPU device files by ``/dev/null`` (autograde jobs get no GPU), and at most
  :data:`GRADER_MAX_TASKS` tasks for the grading account. Its
  working folder is a private copy of the one submission, owned by the
  grading account, deleted afterwards. The gradebook is written by nbgrader
  in the trusted process after the kernel has exited.
- **not root, user namespaces allowed** (``coursehub grading autograde`` in a
  teacher's own server): the same namespaces inside an unprivileged user
  namespace, all capabilities dropped before the student's code starts; the
  kernel keeps the teacher's uid, but cannot see the teacher's processes or
  the hidden folders, and has no network.
- **not root, no user namespaces**: only the environment allow-list and the
  private working copy; same uid, network available. The kernel can then
  read whatever the teacher's account can.

In every case the environment is built from an allow-list
(:func:`plan_sandbox_env`): no hub token, catalog URL, secret key or other
credential reaches nbgrader or the kernel.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import CoursehubError

#: The grading account's default name; ``COURSEHUB_GRADER_USER`` overrides it.
DEFAULT_GRADER_USER = "coursehub-grader"
#: Environment variable naming the grading account.
GRADER_USER_VAR = "COURSEHUB_GRADER_USER"

#: Most tasks (processes and threads) the grading account may have at once, all kernels
#: together (``RLIMIT_NPROC``, getrlimit(2); counted per real uid, set by ``prlimit``).
#: A kernel with its BLAS threads uses a few dozen.
GRADER_MAX_TASKS = 1024

#: Variables passed on as they are (locale, paths, time zone, Python and Jupyter set-up).
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "TMPDIR",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_CONFIG_PATH",
        "JUPYTER_DATA_DIR",
        "JUPYTER_PATH",
        "JUPYTER_PLATFORM_DIRS",
        "MPLBACKEND",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
        "COURSEHUB_N_THREADS",
        "COURSEHUB_GPU_MEM_FRACTION",
        "NBGRADER_EXECUTION",
        "JPY_SESSION_NAME",
    }
)
#: Prefixes passed on: locale categories, thread counts of the numeric libraries
#: (OpenMP API specification ``OMP_*``; MKL, OpenBLAS, numexpr, Accelerate and BLIS
#: documentation), coursehub's grading paths.
ALLOWED_PREFIXES = (
    "LC_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "NUMEXPR_",
    "VECLIB_",
    "BLIS_",
    "COURSEHUB_GRADING_",
)
#: Name patterns never passed on, even when allowed above (``fnmatch``, upper case).
SECRET_PATTERNS = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*PRIVATE*",
    "*API_KEY*",
    "*ACCESS_KEY*",
    "*AUTH*",
    "*COOKIE*",
    "*DATABASE_URL*",
    "*_DSN",
)
#: Variables the course app's ``coursehub grading autograde`` process needs to open the
#: catalog (:func:`coursehub.catalog.db.database_url`); never passed further down.
CATALOG_NAMES = ("COURSEHUB_DATABASE_URL", "COURSEHUB_DATA_DIR", "XDG_DATA_HOME")


def is_secret_name(name: str) -> bool:
    """Return True if the variable ``name`` looks like a credential (:data:`SECRET_PATTERNS`)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_PATTERNS)


def plan_sandbox_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the allow-listed part of ``environ`` for nbgrader and the kernel (pure).

    Parameters
    ----------
    environ
        The environment of the process that starts autograding.

    Returns
    -------
    dict
        The variables of :data:`ALLOWED_NAMES` or with a prefix of
        :data:`ALLOWED_PREFIXES`, minus any whose name matches
        :data:`SECRET_PATTERNS`. Everything else (``JUPYTERHUB_API_TOKEN``,
        ``JPY_API_TOKEN``, ``COURSEHUB_DATABASE_URL``, ``COURSEHUB_SECRET_KEY``,
        ``PGPASSWORD``, ``AWS_SECRET_ACCESS_KEY``, ...) is left out.
    """
    return {
        name: value
        for name, value in environ.items()
        if (name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)) and not is_secret_name(name)
    }


def plan_launch_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the environment of a ``coursehub grading autograde`` process started by the app.

    :func:`plan_sandbox_env` plus :data:`CATALOG_NAMES` (it reads the roster
    and profile from the catalog); it passes neither on to nbgrader.
    """
    env = plan_sandbox_env(environ)
    env.update({name: environ[name] for name in CATALOG_NAMES if name in environ})
    return env


@dataclass(frozen=True)
class GraderAccount:
    """The Unix account that runs students' code: name, uid, gid."""

    name: str
    uid: int
    gid: int


def grader_user_name(environ: Mapping[str, str] | None = None) -> str:
    """Return ``$COURSEHUB_GRADER_USER`` or :data:`DEFAULT_GRADER_USER`."""
    env = os.environ if environ is None else environ
    return env.get(GRADER_USER_VAR) or DEFAULT_GRADER_USER


def plan_useradd(name: str) -> list[str]:
    """Return the command creating the grading account (pure).

    A system account (``useradd --system``, uid below ``UID_MIN`` of
    ``/etc/login.defs``) with its own group, no home directory and no login
    shell: it only ever runs kernels started by coursehub.
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


def find_grader(name: str) -> GraderAccount | None:
    """Return the account ``name`` from the password database, or None."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return GraderAccount(name, entry.pw_uid, entry.pw_gid)


def ensure_grader_user(name: str | None = None) -> GraderAccount:
    """Return the grading account, creating it (as root) when it does not exist yet.

    Raises
    ------
    CoursehubError
        If it does not exist and cannot be created, or if it is root.
    """
    name = name or grader_user_name()
    account = find_grader(name)
    if account is None:
        try:
            subprocess.run(plan_useradd(name), check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            raise CoursehubError(
                f"cannot create the grading account {name!r} ({detail.strip()}); "
                f"as root run: {' '.join(plan_useradd(name))}"
            ) from exc
        account = find_grader(name)
    if account is None or account.uid == 0 or account.gid == 0:
        raise CoursehubError(f"grading account {name!r} must exist and must not be root")
    return account


def plan_kernel_command(
    kernel_cmd: Sequence[str],
    mode: str,
    hidden: Iterable[str | Path] = (),
    account: GraderAccount | None = None,
    devices: Iterable[str | Path] = (),
) -> list[str]:
    """Return the command that starts ``kernel_cmd`` inside the sandbox (pure).

    Parameters
    ----------
    kernel_cmd
        The kernel's own command (``python -m ipykernel_launcher -f FILE``).
    mode
        ``"root"``: namespaces, then the uid/gid of ``account``; ``"uid"``: only
        the uid/gid of ``account`` (root on a host without namespaces);
        ``"userns"``: namespaces inside a user namespace, same uid; ``"none"``:
        unchanged.
    hidden
        Existing directories covered by an empty tmpfs of mode 000.
    account
        The grading account (``"root"`` mode only).
    devices
        Device files the kernel must not open (the GPUs: an autograde job
        has none, and device nodes are usually 0666); ``/dev/null`` is
        bind-mounted over each, in the kernel's mount namespace only.

    Notes
    -----
    With the grading account the kernel also gets ``RLIMIT_NPROC`` =
    :data:`GRADER_MAX_TASKS` (``prlimit``), so that a fork bomb cannot use
    up the host's process ids.

    The kernel's parent poller (ipykernel, ``JPY_PARENT_PID``) cannot see
    nbgrader from inside a PID namespace: the kernel is started
    ``independent`` and ``setpriv --pdeathsig=KILL`` ties it to nbgrader
    instead. ``unshare --fork --pid`` makes ``sh`` PID 1 of the new namespace; it runs
    the kernel as its child (so SIGINT, the kernel interrupt, reaches the
    kernel: a namespace's PID 1 ignores signals it has no handler for), and
    when it exits the kernel of Linux kills whatever the student's code left
    behind (pid_namespaces(7)). ``unshare`` ignores SIGINT and SIGTERM while
    it waits (util-linux unshare(1)).
    """
    if mode == "none":
        return list(kernel_cmd)
    if mode in ("root", "uid") and account is None:
        raise ValueError(f"{mode} mode needs the grading account")
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    if mode in ("root", "uid"):
        assert account is not None
        drop += [f"--reuid={account.uid}", f"--regid={account.gid}", "--clear-groups"]
        # a fork bomb stops at the grading account's task limit, not at the host's pid_max
        drop[:0] = ["prlimit", f"--nproc={GRADER_MAX_TASKS}", "--"]
    if mode == "uid":
        return [*drop, "--", *kernel_cmd]
    # setpriv --pdeathsig: unshare (then, --kill-child, the whole namespace) dies with nbgrader
    unshare = [
        "setpriv",
        "--pdeathsig=KILL",
        "--",
        "unshare",
        "--net",
        "--mount",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
    ]
    if mode == "userns":
        unshare[4:4] = ["--user", "--map-root-user"]
    hidden_args = [str(p) for p in hidden]
    device_args = [str(p) for p in devices]
    script = (
        'n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do '
        'mount -t tmpfs -o size=4k,mode=000 coursehub-hidden "$1" || exit 125; '
        "shift; i=$((i+1)); done; "
        'n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do '
        'mount --bind /dev/null "$1" || exit 125; '
        "shift; i=$((i+1)); done; "
        '"$@"'
    )
    return [
        *unshare,
        "--",
        "/bin/sh",
        "-c",
        script,
        "coursehub-sandbox",
        str(len(hidden_args)),
        *hidden_args,
        str(len(device_args)),
        *device_args,
        *drop,
        "--",
        *kernel_cmd,
    ]


@functools.lru_cache(maxsize=4)
def sandbox_mode(is_root: bool | None = None) -> str:
    """Return the strongest mode of :func:`plan_kernel_command` this host allows.

    Root: ``"root"`` where the namespaces work, else ``"uid"``; otherwise
    ``"userns"`` where unprivileged user namespaces work, else ``"none"``.
    Tries the command once with ``true``.
    """
    is_root = os.geteuid() == 0 if is_root is None else is_root
    mode = "root" if is_root else "userns"
    fallback = "uid" if is_root else "none"
    if not shutil.which("setpriv"):
        if is_root:
            raise CoursehubError("setpriv (util-linux) is needed to autograde as root")
        return "none"
    if not shutil.which("unshare"):
        return fallback
    nobody = GraderAccount("nobody", 65534, 65534)  # any non-root ids do for the probe
    probe = plan_kernel_command(["true"], mode, account=nobody if is_root else None)
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return mode if ok else fallback


#: Device files of GPUs (NVIDIA's driver, the DRM render and card nodes of others).
GPU_DEVICE_PATTERNS = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/kfd")


def gpu_devices(patterns: Iterable[str] = GPU_DEVICE_PATTERNS) -> list[str]:
    """Return the GPU device files (character devices) present on this host, sorted."""
    import glob
    import stat

    found = set()
    for pattern in patterns:
        for path in glob.glob(pattern):
            with contextlib.suppress(OSError):
                if stat.S_ISCHR(os.stat(path).st_mode):
                    found.add(path)
    return sorted(found)


def hidden_paths(paths: Iterable[str | Path], keep: Iterable[str | Path]) -> list[str]:
    """Return the existing directories of ``paths`` to hide, dropping any that holds ``keep``.

    A folder that contains the Python running the kernel or the sandbox's own
    folder cannot be hidden; such a folder is skipped (pure but for the
    ``is_dir`` checks).
    """
    kept = [Path(k).resolve() for k in keep]
    result: list[str] = []
    for path in paths:
        folder = Path(path).resolve()
        if not folder.is_dir() or any(k == folder or folder in k.parents for k in kept):
            continue
        if str(folder) not in result:
            result.append(str(folder))
    return sorted(result)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """``chown -R uid:gid root`` without following symbolic links."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)
