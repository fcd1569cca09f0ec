"""Pure checks and plans of a book build: table of contents, links, build ids, messages.

The files a Jupyter Book 1.x book needs are its ``_config.yml`` and its
``_toc.yml`` (https://jupyterbook.org/en/stable/structure/toc.html); the
table of contents is read with ``sphinx_external_toc``, the parser Jupyter
Book itself uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

TOC_FILE = "_toc.yml"
#: Suffixes of a page named without one in ``_toc.yml``: Jupyter Book's default
#: source suffixes (https://jupyterbook.org/en/stable/file-types/index.html).
PAGE_SUFFIXES = (".md", ".ipynb", ".rst", ".myst")


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


def _leaves(folder: PurePosixPath, path: PurePosixPath, target: str) -> bool:
    """True if the link ``path`` -> ``target`` ends outside ``folder`` (lexically)."""
    if target.startswith("/") or not target:
        return True
    parts: list[str] = list(path.parent.parts)
    for part in PurePosixPath(target).parts:
        if part == "..":
            if not parts:
                return True
            parts.pop()
        elif part != ".":
            parts.append(part)
    inside = PurePosixPath(*parts) if parts else PurePosixPath(".")
    return folder != PurePosixPath(".") and folder not in (inside, *inside.parents)


def plan_links_out(links: Iterable[tuple[str, str]], book_folder: str = "") -> list[str]:
    """Return ``"path -> target"`` for each link of the material that leaves the book (pure).

    Parameters
    ----------
    links
        ``(path, target)`` of every symbolic link of the material,
        ``path`` relative to the material's top.
    book_folder
        The book's folder in the material (``""``: its top).

    A link is refused when its target is absolute, or climbs out of the
    material with ``..``, or, for a link inside the book's folder, ends
    outside that folder.
    """
    book = PurePosixPath(book_folder or ".")
    out = []
    for path, target in links:
        where = PurePosixPath(path)
        in_book = book == PurePosixPath(".") or book in where.parents
        if _leaves(PurePosixPath("."), where, target) or (in_book and _leaves(book, where, target)):
            out.append(f"{path} -> {target}")
    return out


def render_links_out(out: list[str]) -> str:
    """One line naming the links out of the book (at most three)."""
    shown = ", ".join(out[:3]) + (f" and {len(out) - 3} more" if len(out) > 3 else "")
    return (
        f"the book's source holds symbolic links pointing outside the book ({shown}); "
        "replace them with the files themselves; the previous book is still served"
    )
