"""Pure checks and plans of a book build: configuration, table of contents, ids, messages.

The files a Jupyter Book 1.x book needs are its ``_config.yml`` and its
``_toc.yml`` (https://jupyterbook.org/en/stable/structure/toc.html); the
table of contents is read with ``sphinx_external_toc``, the parser Jupyter
Book itself uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from coursehub.books.settings import BookError

CONFIG_FILE = "_config.yml"
TOC_FILE = "_toc.yml"
#: Suffixes of a page named without one in ``_toc.yml``: Jupyter Book's default
#: source suffixes (https://jupyterbook.org/en/stable/file-types/index.html).
PAGE_SUFFIXES = (".md", ".ipynb", ".rst", ".myst")
#: Configuration keys that would load Python from the course's repository into the build.
REFUSED_KEYS = (("sphinx", "local_extensions"),)


def plan_config(
    user: Mapping[str, Any],
    *,
    execute: bool,
    kernel: str | None,
    cell_timeout_s: float,
) -> dict[str, Any]:
    """Return the book's ``_config.yml`` as built: the teacher's, with the course's settings.

    Parameters
    ----------
    user : mapping
        The book's own ``_config.yml``.
    execute : bool
        The course's setting: ``execute_notebooks: force`` (run every notebook)
        if true, else ``"off"`` (stored outputs), whatever the book says.
    kernel : str or None
        The course's kernel spec name: every notebook runs with it
        (myst-nb's ``nb_kernel_rgx_aliases``), or None for the notebooks' own.
    cell_timeout_s : float
        Limit of one cell (``execute.timeout``), seconds.

    Returns
    -------
    dict
        A new configuration; a notebook that fails to execute fails the build
        (``execute.raise_on_error``).

    Raises
    ------
    BookError
        If the configuration is not a mapping or sets a key of :data:`REFUSED_KEYS`.
    """
    if not isinstance(user, Mapping):
        raise BookError(f"{CONFIG_FILE} must be a YAML mapping")
    for section, key in REFUSED_KEYS:
        value = user.get(section)
        if isinstance(value, Mapping) and value.get(key):
            raise BookError(
                f"{CONFIG_FILE} sets {section}.{key}: coursehub does not load Python "
                "from a course's repository into the build"
            )
    config = {k: v for k, v in user.items()}
    run = dict(config.get("execute") or {})
    run["execute_notebooks"] = "force" if execute else "off"
    run["timeout"] = int(cell_timeout_s)
    run["raise_on_error"] = True
    run["allow_errors"] = False
    config["execute"] = run
    if execute and kernel:
        sphinx = dict(config.get("sphinx") or {})
        sphinx_config = dict(sphinx.get("config") or {})
        sphinx_config["nb_kernel_rgx_aliases"] = {".*": kernel}
        sphinx["config"] = sphinx_config
        config["sphinx"] = sphinx
    return config


def plan_missing_pages(docnames: Iterable[str], files: set[str]) -> list[str]:
    """Return the pages of the table of contents that no file of the book provides.

    Parameters
    ----------
    docnames
        The table of contents' documents (``intro``, ``chapters/one``, or with a suffix).
    files
        The book's files, relative POSIX paths.
    """
    missing = []
    for name in docnames:
        candidates = {name} if Path(name).suffix in PAGE_SUFFIXES else set()
        candidates |= {name + suffix for suffix in PAGE_SUFFIXES}
        if not candidates & files:
            missing.append(name)
    return missing


def render_missing(missing: list[str], book: str) -> str:
    """``"_toc.yml names intro2, which is in none of intro2.md, ... in book/"``."""
    names = ", ".join(missing)
    tried = "/".join(PAGE_SUFFIXES)
    return (
        f"{TOC_FILE} names {names}, but {book} has no such page "
        f"(tried the suffixes {tried}); the previous book is still served"
    )


def plan_build_id(now: datetime, taken: set[str]) -> str:
    """A new build's id: ``20261201T101500``, with ``-2``, ``-3``... if taken."""
    stamp = now.strftime("%Y%m%dT%H%M%S")
    candidate, n = stamp, 1
    while candidate in taken:
        n += 1
        candidate = f"{stamp}-{n}"
    return candidate


def plan_prune(builds: Iterable[str], current: str | None, keep: int = 1) -> list[str]:
    """The build folders to remove: all but ``current`` and the ``keep`` newest others."""
    others = sorted(b for b in builds if b != current)
    return others[: max(0, len(others) - keep)]


def render_failure(killed_reason: str | None, returncode: int, last_line: str) -> str:
    """One line saying why the build job failed (``killed_reason`` from the runner)."""
    if killed_reason:
        return f"the build {killed_reason}; the previous book is still served"
    why = f": {last_line}" if last_line else ""
    return f"jupyter-book failed (exit {returncode}){why}; the previous book is still served"


def plan_view(state: Mapping[str, Any], building: bool, alive: bool) -> dict[str, Any]:
    """The state shown to users: a build recorded as running that holds no lock and whose
    process is gone is ``interrupted`` (pure).

    Parameters
    ----------
    state
        The state file (:func:`coursehub.books.settings.read_state`).
    building
        Whether a build holds the course's lock now.
    alive
        Whether the process recorded in ``state["pid"]`` still runs.
    """
    view = dict(state)
    if view.get("state") in ("queued", "building") and not (building or alive):
        view["state"] = "interrupted"
        view["error"] = "the build stopped without finishing (see its log)"
    return view
