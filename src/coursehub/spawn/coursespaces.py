"""A course's shared data folder and kernel in each of its servers, set at spawn time.

:class:`CourseSpaces` is a ``Spawner.pre_spawn_hook`` (JupyterHub calls it
after ``apply_user_options``, so after the course profile, ``jupyterhub/user.py``
``User.spawn``). From the user's course groups (``nbgrader-{course_id}``,
``formgrade-{course_id}``, written by ``coursehub hub sync``) it

* shows each course's data folder (:func:`coursehub.courselayout.data_dir`) at
  ``~/<course_id>-data``, by spawner kind: a symlink made by the hub in the
  home (``local``), a bind mount of the unit, read-only for students
  (``systemd``: ``BindPaths``/``BindReadOnlyPaths``, systemd.exec(5)), a
  symlink made by the job itself on shared storage (``slurm``: batchspawner's
  ``req_prologue`` runs as the user on the compute node, where root-squashed
  NFS homes would refuse the hub), or a ``subPath`` mount of the shared
  volume, read-only for students (``kubernetes``: KubeSpawner ``volumes`` and
  ``volume_mounts``);
* prepends each course's kernel folder (:func:`coursehub.courselayout.jupyter_data_dir`)
  to ``JUPYTER_PATH``, so that a server sees the kernels of its user's courses only.

The file permissions themselves (team writes, students read, others
nothing) are set on the host by ``coursehub data ensure``; the bind and
volume options here only never widen them.
"""

from __future__ import annotations

import os
import pwd
import shlex
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from coursehub.contract import SPAWNER_KINDS, parse_course_group
from coursehub.courselayout import (
    DEFAULT_SHARED_ROOT,
    data_dir,
    data_link_name,
    jupyter_data_dir,
)
from coursehub.errors import UsageError, is_storage_refused, storage_full_kind
from coursehub.settings import COURSE_ID_RE

#: Role of a user in a course, as far as the shared spaces go.
TEAM, STUDENTS = "team", "students"
#: systemd unit properties this hook owns (systemd.exec(5), "Sandboxing").
BIND_KEYS = ("BindPaths", "BindReadOnlyPaths")
#: Name of the shared volume in a pod (KubeSpawner ``volumes``).
KUBE_VOLUME = "coursehub-shared"

# What the admin configured before this hook first changed a spawner.
_ADMIN: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def plan_course_roles(group_names: Iterable[str]) -> dict[str, str]:
    """Return ``{course_id: "team" | "students"}`` from hub group names (pure).

    The team role wins when a user is in both groups of a course; other
    groups, and course ids that are not safe path components, are ignored.
    """
    roles: dict[str, str] = {}
    for name in group_names:
        parsed = parse_course_group(name)
        if parsed is None or not COURSE_ID_RE.match(parsed[1]):
            continue
        role, course_id = parsed
        if roles.get(course_id) != TEAM:
            roles[course_id] = role
    return dict(sorted(roles.items()))


def plan_jupyter_path(root: str, course_ids: Iterable[str], admin_value: str | None) -> str:
    """Return ``JUPYTER_PATH``: the courses' kernel folders, then the admin's value (pure)."""
    parts = [str(jupyter_data_dir(root, c)) for c in course_ids]
    if admin_value:
        parts.append(admin_value)
    return os.pathsep.join(parts)


def plan_bind_paths(
    root: str, roles: Mapping[str, str], home: str, admin: Mapping[str, Any]
) -> dict[str, str]:
    """Return the ``BindPaths``/``BindReadOnlyPaths`` unit properties (pure).

    ``SOURCE:DEST`` pairs separated by spaces (systemd.exec(5)); the
    admin's own pairs come first. A key with nothing to bind is left out.
    """
    pairs: dict[str, list[str]] = {key: [] for key in BIND_KEYS}
    for key in BIND_KEYS:
        if admin.get(key):
            pairs[key].append(str(admin[key]))
    for course_id, role in roles.items():
        key = "BindPaths" if role == TEAM else "BindReadOnlyPaths"
        pairs[key].append(f"{data_dir(root, course_id)}:{home}/{data_link_name(course_id)}")
    return {key: " ".join(values) for key, values in pairs.items() if values}


def plan_kube_mounts(
    root: str, roles: Mapping[str, str], home: str, claim_name: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return KubeSpawner ``volumes`` and ``volume_mounts`` to add (pure).

    One volume (the PersistentVolumeClaim ``claim_name`` holding the shared
    root); per course a ``subPath`` mount of its data folder at
    ``<home>/<course_id>-data`` (read-only for students) and of its kernel
    and environment folders at their host paths, read-only.
    """
    if not roles:
        return [], []
    volumes = [{"name": KUBE_VOLUME, "persistentVolumeClaim": {"claimName": claim_name}}]
    mounts: list[dict[str, Any]] = []
    for course_id, role in roles.items():
        data = data_dir(root, course_id)
        course = data.parent
        mounts.append(
            {
                "name": KUBE_VOLUME,
                "mountPath": f"{home}/{data_link_name(course_id)}",
                "subPath": str(data.relative_to(root)),
                "readOnly": role != TEAM,
            }
        )
        for sub in ("env", "kernels"):
            mounts.append(
                {
                    "name": KUBE_VOLUME,
                    "mountPath": str(course / sub),
                    "subPath": str((course / sub).relative_to(root)),
                    "readOnly": True,
                }
            )
    return volumes, mounts


def render_slurm_prologue(root: str, roles: Mapping[str, str], admin_prologue: str = "") -> str:
    """Return batchspawner's ``req_prologue``: the admin's lines, then one link per course (pure).

    Each line makes ``~/<course_id>-data`` unless something of that name is
    already there (a student's own file is never replaced).
    """
    lines = [admin_prologue] if admin_prologue else []
    for course_id in roles:
        target = shlex.quote(str(data_dir(root, course_id)))
        link = '"$HOME"/' + shlex.quote(data_link_name(course_id))
        lines.append(f"[ -e {link} ] || [ -L {link} ] || ln -s {target} {link}")
    return "\n".join(lines)


def apply_data_links(home: str | os.PathLike[str], root: str, roles: Mapping[str, str]) -> None:
    """Make ``home/<course_id>-data`` -> the course's data folder; remove links of old courses.

    A course whose data folder does not exist gets no link (and loses one
    made before), so a home never holds a dangling link.

    Only symlinks this function would make are replaced or removed; a file
    or folder of the user's own with that name is left alone. The home is
    opened with ``O_NOFOLLOW`` and every call works relative to it, so a
    home that the user replaced by a symlink is refused (OSError).
    """
    courses = Path(root) / "courses"
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        # a course whose data folder is not there (yet) gets no link: never a dangling one
        wanted = {
            data_link_name(c): str(data_dir(root, c)) for c in roles if data_dir(root, c).is_dir()
        }
        owner = os.fstat(fd)
        for name in os.listdir(fd):
            if not name.endswith("-data") or name in wanted:
                continue
            try:
                target = os.readlink(name, dir_fd=fd)
            except OSError:
                continue  # not a symlink
            if Path(target).parent.parent == courses and Path(target).name == "data":
                os.unlink(name, dir_fd=fd)
        for name, target in wanted.items():
            try:
                current = os.readlink(name, dir_fd=fd)
            except FileNotFoundError:
                current = None
            except OSError:
                continue  # the user's own file or folder
            if current == target:
                continue
            if current is not None:
                os.unlink(name, dir_fd=fd)
            os.symlink(target, name, dir_fd=fd)
            if os.geteuid() == 0:
                os.chown(name, owner.st_uid, owner.st_gid, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


class CourseSpaces:
    """``Spawner.pre_spawn_hook`` giving each server its courses' data folders and kernels.

    Parameters
    ----------
    kind
        Spawner kind (:data:`coursehub.contract.SPAWNER_KINDS`).
    root
        The shared root (:mod:`coursehub.courselayout`).
    claim_name
        ``kubernetes``: the PersistentVolumeClaim holding the shared root.
    kube_home
        ``kubernetes``: the home folder in the pods (``/home/jovyan`` in the
        Jupyter Docker Stacks images).

    Raises
    ------
    UsageError
        For an unknown kind or a relative root.
    """

    def __init__(
        self,
        kind: str,
        root: str = DEFAULT_SHARED_ROOT,
        claim_name: str = "coursehub-shared",
        kube_home: str = "/home/jovyan",
    ) -> None:
        if kind not in SPAWNER_KINDS:
            raise UsageError(f"unknown spawner kind {kind!r}: choose one of {SPAWNER_KINDS}")
        if not os.path.isabs(root):
            raise UsageError(f"the shared root must be an absolute path, got {root!r}")
        self.kind = kind
        self.root = root
        self.claim_name = claim_name
        self.kube_home = kube_home

    def __call__(self, spawner: Any) -> None:
        """Apply the user's course spaces to ``spawner`` (see the module docstring)."""
        roles = plan_course_roles(group.name for group in spawner.user.groups)
        admin = _ADMIN.setdefault(spawner, _admin_values(spawner))
        env = dict(spawner.environment)
        env["JUPYTER_PATH"] = plan_jupyter_path(self.root, roles, admin["JUPYTER_PATH"])
        spawner.environment = env
        if self.kind == "local":
            self._link_local(spawner, roles)
        elif self.kind == "systemd":
            home = _home_of(spawner) or f"/home/{spawner.user.name}"
            props = {k: v for k, v in spawner.unit_extra_properties.items() if k not in BIND_KEYS}
            props.update(plan_bind_paths(self.root, roles, home, admin["unit"]))
            spawner.unit_extra_properties = props
        elif self.kind == "slurm":
            spawner.req_prologue = render_slurm_prologue(self.root, roles, admin["prologue"])
        else:
            volumes, mounts = plan_kube_mounts(self.root, roles, self.kube_home, self.claim_name)
            spawner.volumes = [*admin["volumes"], *volumes]
            spawner.volume_mounts = [*admin["volume_mounts"], *mounts]
        spawner.log.info("coursehub: %s course spaces %s", spawner._log_name, roles or "none")

    def _link_local(self, spawner: Any, roles: Mapping[str, str]) -> None:
        """The data links in a local home; a full home (disk or quota) is logged and skipped."""
        try:
            home = _home_of(spawner)
            if home is not None:
                apply_data_links(home, self.root, roles)
        except OSError as exc:
            if not is_storage_refused(exc):
                raise
            spawner.log.warning(
                "coursehub: %s: home is full (%s): course data links not made, the server "
                "starts without them",
                spawner._log_name,
                storage_full_kind(exc),
            )


def _admin_values(spawner: Any) -> dict[str, Any]:
    env = spawner.environment
    path = env.get("JUPYTER_PATH")
    unit = getattr(spawner, "unit_extra_properties", {}) or {}
    return {
        "JUPYTER_PATH": path if isinstance(path, str) and path else None,
        "unit": {k: unit[k] for k in BIND_KEYS if k in unit},
        "prologue": getattr(spawner, "req_prologue", "") or "",
        "volumes": list(getattr(spawner, "volumes", []) or []),
        "volume_mounts": list(getattr(spawner, "volume_mounts", []) or []),
    }


def _home_of(spawner: Any) -> str | None:
    """The server's home: the simple spawner's ``home_dir`` (made if missing), else the user's."""
    home = getattr(spawner, "home_dir", None)
    if isinstance(home, str) and home:
        os.makedirs(home, exist_ok=True)
        return home
    try:
        home = pwd.getpwnam(spawner.user.name).pw_dir
    except KeyError:
        spawner.log.warning("coursehub: no Unix account %s: no data links", spawner.user.name)
        return None
    return home if os.path.isdir(home) else None
