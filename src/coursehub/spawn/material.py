"""A new server of a course gets the course's material: nbgitpuller as the landing page.

The course sync writes, on each course's hub groups, the property
``material`` = ``{"repo": "file:///.../published/<course_id>.git",
"branch": "main", "target": "<course_id>-material"}`` once the course app's
host has a good mirror (:func:`coursehub.catalog.material.material_properties`).
At spawn time :func:`apply_material` (called by
:meth:`coursehub.spawn.spawner.CourseProfiles.apply`) reads it from the
user's groups and

- sets ``Spawner.default_url`` to nbgitpuller's ``git-pull`` link for the
  course the server starts for (the chosen course, else the user's only
  course with material): the first page of the new server clones the
  material, later starts merge the teacher's updates while keeping the
  student's edits (nbgitpuller's documented use of ``default_url``);
- points ``GIT_CONFIG_SYSTEM`` at the published folder's ``gitconfig``,
  which lists each published repository as a ``safe.directory``
  (``git help config``): the repositories belong to the coursehub service
  user, and git (2.39.4, 2.45.1 and later) refuses to clone a local
  repository another user owns without it.

Nothing of a credential reaches the server: the repository is a path that
the student reads, nothing more.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from coursehub.contract import course_id_of_group

#: Hub group property written by the sync.
MATERIAL_PROPERTY = "material"
_ADMIN_DEFAULT_URL: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def parse_materials(groups: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[str, str]]:
    """``course_id`` -> the ``material`` property of the user's course groups (pure).

    A malformed property (not three non-empty strings, a ``target`` with a
    ``/``) is left out: the server starts without that course's material.
    """
    found: dict[str, dict[str, str]] = {}
    for name, properties in groups:
        course_id = course_id_of_group(name)
        value = (properties or {}).get(MATERIAL_PROPERTY)
        if course_id is None or not isinstance(value, Mapping):
            continue
        entry = {key: value.get(key) for key in ("repo", "branch", "target")}
        if all(isinstance(v, str) and v for v in entry.values()) and "/" not in str(
            entry["target"]
        ):
            found[course_id] = {key: str(v) for key, v in entry.items()}
    return found


def render_pull_path(material: Mapping[str, str], landing: str = "lab") -> str:
    """nbgitpuller's link below a server's URL: ``git-pull?repo=...&branch=...&targetpath=...``.

    ``urlpath`` opens the pulled folder in JupyterLab (``landing`` "lab") or
    the classic tree. Parameters: nbgitpuller's ``handlers.py`` (``repo``,
    ``branch``, ``targetpath``, ``urlpath``).
    """
    target = material["target"]
    query = {
        "repo": material["repo"],
        "branch": material["branch"],
        "targetpath": target,
        "urlpath": f"{landing}/tree/{target}" if landing == "lab" else f"tree/{target}",
    }
    return "git-pull?" + urlencode(query)


def plan_material_env(materials: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``GIT_CONFIG_SYSTEM``: the published folder's ``gitconfig``, which marks each published
    repository a ``safe.directory`` (and includes ``/etc/gitconfig``).

    Not ``GIT_CONFIG_COUNT``: git drops those variables when it runs
    ``upload-pack`` for a local clone (``local_repo_env`` in git's
    ``environment.c``), so the exception must be in a configuration file.
    """
    folders = sorted(
        {
            str(PurePosixPath(unquote(urlsplit(m["repo"]).path)).parent)
            for m in materials.values()
            if m["repo"].startswith("file://")
        }
    )
    return {"GIT_CONFIG_SYSTEM": f"{folders[0]}/gitconfig"} if folders else {}


def choose_material(
    materials: Mapping[str, Mapping[str, str]], course_id: str | None
) -> Mapping[str, str] | None:
    """The material the server lands on: the chosen course's, else the only one, else None."""
    if course_id and course_id in materials:
        return materials[course_id]
    if len(materials) == 1:
        return next(iter(materials.values()))
    return None


def apply_material(spawner: Any, user_options: Mapping[str, Any] | None) -> None:
    """Set the spawner's ``default_url`` and ``environment`` for its user's course material.

    Called after the profile's traits are applied. A server whose courses
    have no material keeps the admin's ``default_url``.
    """
    admin_url = _ADMIN_DEFAULT_URL.setdefault(spawner, getattr(spawner, "default_url", "") or "")
    groups = [(group.name, group.properties or {}) for group in spawner.user.groups]
    materials = parse_materials(groups)
    requested = user_options.get("course") if isinstance(user_options, Mapping) else None
    chosen = choose_material(materials, str(requested) if requested else None)
    landing = "tree" if admin_url.strip("/").startswith("tree") else "lab"
    spawner.default_url = "/" + render_pull_path(chosen, landing) if chosen else admin_url
    env = plan_material_env(materials)
    if env:
        spawner.environment = {**spawner.environment, **env}
    if chosen:
        spawner.log.info("coursehub: %s lands on %s", spawner._log_name, chosen["target"])
