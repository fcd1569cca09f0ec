"""What a backup holds, and where each part lives on this host.

Every part is found the way the rest of coursehub finds it, from the same
environment (:mod:`coursehub.settings`, docs/settings.md):

========================  ======  ===========================================================
name in the archive       kind    where it lives
========================  ======  ===========================================================
``catalog``               db      ``COURSEHUB_DATABASE_URL``, else the data directory's
                                  ``catalog.sqlite`` (:func:`coursehub.catalog.db.database_url`)
``hub/jupyterhub.sqlite`` file    the hub's database in its data folder (``--hub-dir``,
                                  default ``/srv/jupyterhub``, as ``coursehub hub config``)
``hub/cookie-secret``     file    the hub's ``jupyterhub_cookie_secret`` beside it
``grading/courses``       tree    ``COURSEHUB_GRADING_COURSES``: course folders, gradebooks,
                                  submissions, autograded and feedback files
``grading/exchange``      tree    ``COURSEHUB_GRADING_EXCHANGE``: released, submitted, feedback
``material``              tree    ``COURSEHUB_MATERIAL_DIR``: mirrors, published repositories,
                                  credentials (:func:`coursehub.material.layout.material_root`)
``books``                 tree    ``COURSEHUB_BOOKS_DIR``
                                  (:func:`coursehub.books.settings.books_root`)
``lti/tool-key.pem``      file    ``COURSEHUB_LTI_TOOL_KEY``
                                  (:func:`coursehub.lti.keys.tool_key_path`)
``usage``                 tree    ``COURSEHUB_USAGE_DIR`` or ``--usage-dir``: usage records not
                                  yet pruned (those ingested are in the catalog too)
========================  ======  ===========================================================

A restore puts each part back where the restoring host's environment says it
lives, which need not be where it was backed up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import UsageError

#: The kinds of part: a database (SQLite file or PostgreSQL), one file, a folder and all below it.
KINDS = ("db", "file", "tree")
#: Default data folder of the hub, as ``coursehub hub config --data-dir`` (coursehub.hub.render).
DEFAULT_HUB_DIR = "/srv/jupyterhub"
#: The hub's files in its data folder, as the rendered hub configuration names them.
HUB_DATABASE = "jupyterhub.sqlite"
HUB_COOKIE_SECRET = "jupyterhub_cookie_secret"


@dataclass(frozen=True)
class Source:
    """One part of a backup.

    Attributes
    ----------
    name : str
        Its name in the archive, e.g. ``"grading/courses"``; the archive holds
        it under ``data/<name>``.
    kind : str
        One of :data:`KINDS`.
    path : pathlib.Path or None
        Where it lives on this host (for ``db``: the SQLite file, None for PostgreSQL).
    url : str
        For ``db``: the catalog's SQLAlchemy URL; else ``""``.
    """

    name: str
    kind: str
    path: Path | None
    url: str = ""

    @property
    def where(self) -> str:
        """Where it lives, for messages (a PostgreSQL URL without its password)."""
        if self.path is not None:
            return str(self.path)
        from sqlalchemy.engine import make_url

        return make_url(self.url).render_as_string(hide_password=True)


def find_sources(
    environ: Mapping[str, str] | None = None,
    *,
    database_url: str | None = None,
    hub_dir: str | os.PathLike[str] | None = None,
    usage_dir: str | os.PathLike[str] | None = None,
) -> tuple[Source, ...]:
    """Return every part of a backup, with where it lives here (nothing is read or made).

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; None: ``os.environ``.
    database_url : str, optional
        The catalog's SQLAlchemy URL (default: :func:`coursehub.catalog.db.database_url`).
    hub_dir : path, optional
        The hub's data folder (default :data:`DEFAULT_HUB_DIR`).
    usage_dir : path, optional
        The usage records' folder (default ``COURSEHUB_USAGE_DIR``; unset: none).

    Returns
    -------
    tuple of Source
        In archive order: catalog, hub, grading, material, books, LTI key, usage.

    Raises
    ------
    UsageError
        If the catalog's URL is neither SQLite nor PostgreSQL, or names an
        in-memory database.
    """
    from coursehub.books.settings import books_root
    from coursehub.catalog.db import database_url as default_url
    from coursehub.lti.keys import tool_key_path
    from coursehub.material.layout import material_root

    env = os.environ if environ is None else environ
    hub = Path(hub_dir or DEFAULT_HUB_DIR).expanduser()
    usage = usage_dir or env.get("COURSEHUB_USAGE_DIR") or None
    sources = [
        catalog_source(database_url or default_url(env)),
        Source("hub/jupyterhub.sqlite", "file", hub / HUB_DATABASE),
        Source("hub/cookie-secret", "file", hub / HUB_COOKIE_SECRET),
        Source("grading/courses", "tree", _path(env, "COURSEHUB_GRADING_COURSES")),
        Source("grading/exchange", "tree", _path(env, "COURSEHUB_GRADING_EXCHANGE")),
        Source("material", "tree", material_root(env)),
        Source("books", "tree", books_root(env)),
        Source("lti/tool-key.pem", "file", tool_key_path(env)),
    ]
    if usage:
        sources.append(Source("usage", "tree", Path(usage).expanduser()))
    checked = tuple(sources)
    check_apart(checked)
    return checked


def _path(env: Mapping[str, str], name: str) -> Path:
    """The folder of a grading variable, else its default, as ``layout_from_env`` reads it."""
    from coursehub.grading.layout import DEFAULT_COURSES_ROOT, DEFAULT_EXCHANGE_ROOT

    default = {
        "COURSEHUB_GRADING_COURSES": DEFAULT_COURSES_ROOT,
        "COURSEHUB_GRADING_EXCHANGE": DEFAULT_EXCHANGE_ROOT,
    }[name]
    return Path(env.get(name, default))


def catalog_source(url: str) -> Source:
    """Return the catalog's part for its SQLAlchemy ``url`` (SQLite file or PostgreSQL).

    Raises
    ------
    UsageError
        Another backend, or an in-memory SQLite database.
    """
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return Source("catalog", "db", None, url)
    database = parsed.database or ""
    if backend != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        raise UsageError(
            f"cannot back up the catalog {parsed.render_as_string(hide_password=True)}: "
            "only a SQLite file or a PostgreSQL database"
        )
    return Source("catalog", "db", Path(database).expanduser(), url)


def check_apart(sources: Sequence[Source]) -> None:
    """Refuse parts of which one lies inside a folder that another is (restoring one would
    replace the other).

    Raises
    ------
    UsageError
        Naming both parts and their paths.
    """
    placed = [s for s in sources if s.path is not None]
    for tree in (s for s in placed if s.kind == "tree"):
        root = os.path.abspath(tree.path)  # type: ignore[arg-type]
        for other in placed:
            inner = os.path.abspath(other.path)  # type: ignore[arg-type]
            if other is not tree and (inner == root or inner.startswith(root + os.sep)):
                raise UsageError(
                    f"{other.name} ({inner}) lies in {tree.name} ({root}): give each "
                    "its own folder (docs/backup.md)"
                )
