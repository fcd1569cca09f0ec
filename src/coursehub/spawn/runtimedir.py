"""Each server's Jupyter runtime files outside its home, so a full home never stops a start.

jupyter-server writes its runtime files (``jpserver-<pid>.json``, the
browser-open file, the cookie secret, each kernel's connection file) in
``JUPYTER_RUNTIME_DIR``, by default ``~/.local/share/jupyter/runtime``
(``jupyter_core.paths.jupyter_runtime_dir``). On a home at its quota or on a
full disk that write fails and the server dies before it answers the hub
(``OSError: [Errno 28]`` in ``write_browser_open_file``), so the student who
filled their home could not even start a server to delete files.

:class:`ServerRuntime` is a ``Spawner.pre_spawn_hook`` (with
:meth:`ServerRuntime.release` as a ``post_stop_hook``) that points
``JUPYTER_RUNTIME_DIR`` at a folder of the server's own, by spawner kind:

* ``local``: ``<runtime root>/servers-<hub_id>/jupyter-<user>[-<server>]``
  (``/run/coursehub`` as root, a tmpfs), made fresh at each start (0700,
  owned by the server's Unix user) and removed when the server stops;
* ``systemd``: the unit's ``RuntimeDirectory=`` (systemd.exec(5), made by
  systemd for the unit's user, removed when the unit stops);
* ``slurm``: a ``mktemp -d`` folder in the job's ``$TMPDIR`` (or ``/tmp``),
  made by batchspawner's ``req_prologue`` and removed by its ``req_epilogue``;
* ``kubernetes``: ``/tmp/jupyter-runtime``, in the pod's own file system.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tornado import web

from coursehub.contract import SPAWNER_KINDS
from coursehub.errors import UsageError, is_storage_refused
from coursehub.spawn.cgrouprecord import cgroup_name_for
from coursehub.spawn.identity import check_hub_id, default_runtime_dir, hub_id_from_config

#: The variable jupyter_core reads (``jupyter_core/paths.py``, ``jupyter_runtime_dir``).
RUNTIME_VAR = "JUPYTER_RUNTIME_DIR"
#: The variable IPython reads for its profile folder (``IPython/paths.py``, ``get_ipython_dir``).
IPYTHON_VAR = "IPYTHONDIR"
#: Kubernetes: a folder of the pod's own file system (not the home volume).
KUBE_RUNTIME_DIR = "/tmp/jupyter-runtime"
#: Marks the lines of batchspawner's prologue and epilogue that this hook owns.
SLURM_MARK = "# coursehub: runtime dir"


def servers_runtime_root(hub_id: str, runtime_dir: str | None = None) -> Path:
    """Return the folder of this hub's servers' runtime folders (``servers-<hub_id>``)."""
    return Path(runtime_dir or default_runtime_dir()) / f"servers-{check_hub_id(hub_id)}"


def make_runtime_dir(path: Path, uid: int, gid: int) -> Path:
    """Make ``path`` afresh: an empty folder, mode 0700, owned by ``uid:gid``.

    Its parent is made if missing (0755, the hub's own); whatever was left at
    ``path`` by a server that died is removed first.

    Raises
    ------
    UsageError
        If the parent folder belongs to another user (someone else made it).
    """
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if os.lstat(path.parent).st_uid != os.geteuid():
        raise UsageError(f"runtime folder {path.parent} belongs to another user: remove it")
    remove_runtime_dir(path)
    os.mkdir(path, 0o700)
    if os.geteuid() == 0 and (uid, gid) != (0, 0):
        os.chown(path, uid, gid)
    return path


def remove_runtime_dir(path: Path) -> None:
    """Remove ``path`` and what it holds (a symlink is removed, never followed)."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)  # fd-based on Linux: symlinks inside are not followed


def render_slurm_lines(admin_prologue: str, admin_epilogue: str) -> tuple[str, str]:
    """Return batchspawner's ``req_prologue`` and ``req_epilogue`` with the runtime folder (pure).

    The job's shell makes the folder before the server starts and removes it
    after the server ends (batchspawner's ``SlurmSpawner.batch_script``).
    """
    make = (
        f'export {RUNTIME_VAR}="$(mktemp -d "${{TMPDIR:-/tmp}}/jupyter-runtime-XXXXXX")"  '
        + SLURM_MARK
    )
    remove = f'rm -rf -- "${RUNTIME_VAR}"  {SLURM_MARK}'
    prologue = "\n".join(line for line in (admin_prologue, make) if line)
    epilogue = "\n".join(line for line in (remove, admin_epilogue) if line)
    return prologue, epilogue


def _without_own_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.endswith(SLURM_MARK))


class ServerRuntime:
    """``Spawner.pre_spawn_hook``: the server's ``JUPYTER_RUNTIME_DIR`` outside its home.

    Parameters
    ----------
    kind
        Spawner kind (:data:`coursehub.contract.SPAWNER_KINDS`).
    hub_id
        This hub's id (folder and unit names); None: the spawner's own
        ``hub_id``, else that of its configuration
        (:func:`coursehub.spawn.identity.hub_id_from_config`).
    runtime_dir
        ``local``: where ``servers-<hub_id>`` goes; None:
        :func:`coursehub.spawn.identity.default_runtime_dir`.

    Raises
    ------
    UsageError
        For an unknown kind or a malformed hub id.
    """

    def __init__(self, kind: str, hub_id: str | None = None, runtime_dir: str | None = None):
        if kind not in SPAWNER_KINDS:
            raise UsageError(f"unknown spawner kind {kind!r}: choose one of {SPAWNER_KINDS}")
        self.kind = kind
        self.hub_id = check_hub_id(hub_id) if hub_id else None
        self.runtime_dir = runtime_dir

    def _hub_id(self, spawner: Any) -> str:
        return self.hub_id or getattr(spawner, "hub_id", None) or hub_id_from_config(spawner.config)

    def server_dir(self, spawner: Any) -> Path:
        """``local``: this server's runtime folder."""
        name = cgroup_name_for(spawner.user.name, spawner.name or "")
        return servers_runtime_root(self._hub_id(spawner), self.runtime_dir) / name

    def __call__(self, spawner: Any) -> None:
        """Point the server's ``JUPYTER_RUNTIME_DIR`` at its own folder (see the module docstring).

        Raises
        ------
        tornado.web.HTTPError
            500 when the local folder cannot be made (the reason in one line).
        """
        if self.kind == "local":
            path = self._make_local(spawner)
        elif self.kind == "systemd":
            name = f"coursehub-runtime/{self._hub_id(spawner)}-" + cgroup_name_for(
                spawner.user.name, spawner.name or ""
            )
            props = dict(spawner.unit_extra_properties)
            props.update({"RuntimeDirectory": name, "RuntimeDirectoryMode": "0700"})
            spawner.unit_extra_properties = props
            path = Path("/run") / name
        elif self.kind == "slurm":
            prologue, epilogue = render_slurm_lines(
                _without_own_lines(getattr(spawner, "req_prologue", "") or ""),
                _without_own_lines(getattr(spawner, "req_epilogue", "") or ""),
            )
            spawner.req_prologue, spawner.req_epilogue = prologue, epilogue
            spawner.log.info("coursehub: %s runtime files in the job's TMPDIR", spawner._log_name)
            return
        else:
            path = Path(KUBE_RUNTIME_DIR)
        spawner.environment = {**spawner.environment, RUNTIME_VAR: str(path)}
        spawner.log.info("coursehub: %s runtime files in %s", spawner._log_name, path)

    def _make_local(self, spawner: Any) -> Path:
        path = self.server_dir(spawner)
        try:
            uid, gid, home = _server_owner(spawner)
            make_runtime_dir(path, uid, gid)
        except (OSError, KeyError, UsageError) as exc:
            spawner.log.error("coursehub: %s: runtime folder %s: %s", spawner._log_name, path, exc)
            message = f"cannot make the server's runtime folder {path}: {exc}"
            raise web.HTTPError(500, message) from exc
        if not ensure_ipython_dir(home, uid, gid):
            spawner.environment = {**spawner.environment, IPYTHON_VAR: str(path / "ipython")}
            spawner.log.warning(
                "coursehub: %s: home %s is full: IPython's profile is in %s for this start",
                spawner._log_name,
                home,
                path / "ipython",
            )
        return path

    def release(self, spawner: Any) -> None:
        """``Spawner.post_stop_hook``: remove the stopped server's local runtime folder."""
        if self.kind != "local":
            return
        path = self.server_dir(spawner)
        try:
            remove_runtime_dir(path)
        except OSError as exc:
            spawner.log.warning("coursehub: cannot remove runtime folder %s: %s", path, exc)


def ensure_ipython_dir(home: str, uid: int, gid: int) -> bool:
    """Make ``home/.ipython`` if missing; return False when the home is too full for it.

    A kernel needs that folder: jupyter_client lists the kernels of
    ``IPython.paths.get_ipython_dir()``, which makes it, and a failure there
    (``ENOSPC``, ``EDQUOT``, ``EROFS``) refuses every kernel start. With a new
    ``.ipython`` goes jupyter_core's marker ``.jupyter/migrated``
    (``jupyter_core/application.py``, ``migrate_config``): else the server's
    first start would migrate the new folder and die writing that marker on a
    home that takes folders but no data (a full tmpfs). Both are made
    relative to the home opened with ``O_NOFOLLOW``, owned by ``uid:gid``,
    and removed again when the home is full. A home not there yet, or any
    other error, is left to the server (True).
    """
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return True
    made: list[str] = []
    try:
        for name in (".ipython", ".jupyter"):
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=fd)
                made.append(name)
        if ".ipython" in made:
            _write_marker(fd, made)
        for name in made:
            if os.geteuid() == 0:
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
    except OSError as exc:
        for name in reversed(made):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd) if "/" in name else os.rmdir(name, dir_fd=fd)
        return not is_storage_refused(exc)
    finally:
        os.close(fd)
    return True


def _write_marker(fd: int, made: list[str]) -> None:
    marker = ".jupyter/migrated"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        handle = os.open(marker, flags, 0o644, dir_fd=fd)
    except FileExistsError:
        return
    made.append(marker)
    try:
        os.write(handle, datetime.now(tz=UTC).isoformat().encode())
        os.fsync(handle)
    finally:
        os.close(handle)


def _server_owner(spawner: Any) -> tuple[int, int, str]:
    """The server's Unix user and home: the hub's own user (simple spawner), else the hub user's."""
    if getattr(spawner, "home_dir_template", None):
        home = spawner.home_dir_template.format(username=spawner.user.name)
        return os.geteuid(), os.getegid(), home
    entry = pwd.getpwnam(spawner.user.name)
    return entry.pw_uid, entry.pw_gid, entry.pw_dir
