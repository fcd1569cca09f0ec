"""Where a course's shared files live on the host: data folder, environment, kernels.

The admin side (:mod:`coursehub.coursedata`, :mod:`coursehub.courseenv`) and the
hub process (:mod:`coursehub.spawn.coursespaces`) agree on one layout under the
shared root (``COURSEHUB_SHARED_ROOT``, default :data:`DEFAULT_SHARED_ROOT`)::

    <root>/courses/<course_id>/data                  team writes, students read
    <root>/courses/<course_id>/env/current -> builds/<stamp>   the course's Python
    <root>/courses/<course_id>/kernels/share/jupyter/kernels/<kernel_name>

On Slurm the root must be on storage shared with the compute nodes, at the
same path; on Kubernetes it is a volume mounted at the same path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from coursehub.errors import UsageError
from coursehub.settings import check_course_id

#: Default shared root: the FHS place for "data for services provided by this system".
DEFAULT_SHARED_ROOT = "/srv/coursehub"
#: Environment variable naming the shared root.
SHARED_ROOT_ENV = "COURSEHUB_SHARED_ROOT"


def shared_root(environ: Mapping[str, str] | None = None) -> Path:
    """Return the shared root: ``$COURSEHUB_SHARED_ROOT``, else :data:`DEFAULT_SHARED_ROOT`.

    Raises
    ------
    UsageError
        If the variable holds a relative path or white space.
    """
    env = os.environ if environ is None else environ
    return check_shared_root(env.get(SHARED_ROOT_ENV) or DEFAULT_SHARED_ROOT)


def check_shared_root(root: str | os.PathLike[str]) -> Path:
    """Return ``root`` as a Path if it is absolute and has no white space, else raise UsageError.

    White space is refused because systemd's ``BindPaths=`` separates its
    entries with spaces (systemd.exec(5)).
    """
    path = Path(root)
    if not path.is_absolute() or re.search(r"\s", str(path)):
        raise UsageError(
            f"the shared root must be an absolute path without spaces, got {str(root)!r}"
        )
    return path


def course_dir(root: str | os.PathLike[str], course_id: str) -> Path:
    """Return ``<root>/courses/<course_id>`` (UsageError for an unsafe course id)."""
    return Path(root) / "courses" / check_course_id(course_id)


def data_dir(root: str | os.PathLike[str], course_id: str) -> Path:
    """Return the course's shared data folder ``<root>/courses/<course_id>/data``."""
    return course_dir(root, course_id) / "data"


def env_dir(root: str | os.PathLike[str], course_id: str) -> Path:
    """Return the course's environment folder (builds, ``current`` link, state, logs)."""
    return course_dir(root, course_id) / "env"


def kernels_prefix(root: str | os.PathLike[str], course_id: str) -> Path:
    """Return the ``--prefix`` of ``ipykernel install`` for the course's kernel."""
    return course_dir(root, course_id) / "kernels"


def jupyter_data_dir(root: str | os.PathLike[str], course_id: str) -> Path:
    """Return the folder to add to ``JUPYTER_PATH`` so that a server sees the course's kernel.

    ``jupyter_client`` looks for kernel specs in ``<each JUPYTER_PATH entry>/kernels``
    (jupyter_core docs, "Data files"); ``ipykernel install --prefix P`` writes them
    to ``P/share/jupyter/kernels``.
    """
    return kernels_prefix(root, course_id) / "share" / "jupyter"


def kernel_name(course_id: str) -> str:
    """Return the kernel spec name of a course: ``course-<course_id>``."""
    return f"course-{check_course_id(course_id)}"


def data_link_name(course_id: str) -> str:
    """Return the name of the data folder in a home directory: ``<course_id>-data``."""
    return f"{check_course_id(course_id)}-data"
