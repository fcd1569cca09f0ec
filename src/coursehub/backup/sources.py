"""What a backup holds, and where each part lives on this host.

Every part is found the way the rest of coursehub finds it, from the same
environment (:mod:`coursehub.settings`, docs/settings.md):

========================  ======  ===========================================================
name in the archive       kind    where it lives
========================  ======  ===========================================================
``catalog``               db      ``COURSEHUB_DATABASE_URL``, else the data directory's
                                  ``catalog.sqlite`` (:func:`coursehub.catalog.db.database_url`)
``hub/jupyterhub.sqlite`` file    the hub's database in its data folder (``--hub-dir``,
                                  default :func:`default_hub_dir`)
``hub/cookie-secret``     file    the hub's ``jupyterhub_cookie_secret``: in a deploy layout
                                  ``/etc/coursehub`` (:func:`hub_sources`), else beside the
                                  database (the demo, ``coursehub hub config``)
``deploy/secrets.env``    file    a deploy layout only: ``/etc/coursehub/secrets.env``
``deploy/web.env``        file    a deploy layout only: ``/etc/coursehub/web.env``
``deploy/tls``            tree    a deploy layout only: ``/etc/coursehub/tls``
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
#: The files of a deploy layout (coursehub.deploy.layout) that a new ``coursehub deploy``
#: does not write again as they were (made once, at random): part name -> (kind, attribute
#: of ``DeployLayout``). The cookie secret is ``hub/cookie-secret``, in either layout.
DEPLOY_PARTS = {
    "deploy/secrets.env": ("file", "secrets_env"),
    "deploy/web.env": ("file", "web_env"),
    "deploy/tls": ("tree", "tls_dir"),
}


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
        The hub's data folder (default :func:`default_hub_dir`); a deploy
        layout's brings that layout's secrets (:func:`hub_sources`).
    usage_dir : path, optional
        The usage records' folder (default ``COURSEHUB_USAGE_DIR``; unset: none).

    Returns
    -------
    tuple of Source
        In archive order: catalog, hub (and a deploy layout's files), grading,
        material, books, LTI key, usage.

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
    hub = Path(hub_dir).expanduser() if hub_dir else default_hub_dir()
    usage = usage_dir or env.get("COURSEHUB_USAGE_DIR") or None
    sources = [
        catalog_source(database_url or default_url(env)),
        *hub_sources(hub),
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


def deploy_root(hub: Path) -> Path | None:
    """Return the root of the deploy layout whose hub folder ``hub`` is, else None.

    ``/var/lib/coursehub/hub`` gives ``/``; ``DIR/var/lib/coursehub/hub`` (an
    install made with ``coursehub deploy --root DIR``) gives ``DIR``.
    """
    from coursehub.deploy.layout import DeployLayout

    tail = DeployLayout().hub_dir.parts[1:]
    parts = Path(os.path.abspath(hub)).parts
    if len(parts) <= len(tail) or parts[-len(tail) :] != tail:
        return None
    return Path(*parts[: -len(tail)])


def default_hub_dir(root: Path = Path("/")) -> Path:
    """Return the hub's data folder when none is given: the deploy layout's
    (``/var/lib/coursehub/hub``) where ``coursehub deploy`` wrote its hub
    configuration below ``root``, else :data:`DEFAULT_HUB_DIR` below ``root``."""
    from coursehub.deploy.layout import DeployLayout

    layout = DeployLayout(root=root)
    if layout.on_disk(layout.hub_config).is_file():
        return layout.on_disk(layout.hub_dir)
    return root / DEFAULT_HUB_DIR.lstrip("/")


def hub_sources(hub: Path) -> list[Source]:
    """Return the hub's parts for its data folder ``hub``: its database, its cookie secret
    and, in a deploy layout, the install's files of :data:`DEPLOY_PARTS`.

    In a deploy layout (:func:`deploy_root`) the cookie secret and the other
    secrets are where ``coursehub deploy`` wrote them, below the same root
    (``/etc/coursehub``, :class:`coursehub.deploy.layout.DeployLayout`);
    elsewhere (the demo, ``coursehub hub config --data-dir``) the cookie secret
    lies beside the database.
    """
    from coursehub.deploy.layout import DeployLayout

    database = Source("hub/jupyterhub.sqlite", "file", hub / HUB_DATABASE)
    root = deploy_root(hub)
    if root is None:
        return [database, Source("hub/cookie-secret", "file", hub / HUB_COOKIE_SECRET)]
    layout = DeployLayout(root=root)
    found = [database, Source("hub/cookie-secret", "file", layout.on_disk(layout.cookie_secret))]
    for name, (kind, attribute) in DEPLOY_PARTS.items():
        found.append(Source(name, kind, layout.on_disk(getattr(layout, attribute))))
    return found


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
