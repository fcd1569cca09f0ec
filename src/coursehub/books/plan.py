"""Pure checks and plans of a book build: configuration, table of contents, ids, messages.

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

from coursehub.books.settings import BookError

CONFIG_FILE = "_config.yml"
TOC_FILE = "_toc.yml"
#: Suffixes of a page named without one in ``_toc.yml``: Jupyter Book's default
#: source suffixes (https://jupyterbook.org/en/stable/file-types/index.html).
PAGE_SUFFIXES = (".md", ".ipynb", ".rst", ".myst")
#: Configuration keys that would load Python from the course's repository into the build.
REFUSED_KEYS = (("sphinx", "local_extensions"),)
#: Top-level keys of ``_config.yml`` kept as the book says (titles, layout, links), each
#: checked by :func:`plan_safe_config`; ``html``, ``parse``, ``latex`` and ``sphinx`` are
#: kept only for the keys below them. Every other key (``execute``, ``launch_buttons``,
#: ``bibtex_bibfiles`` naming a file outside the book...) is dropped.
SAFE_TOP_KEYS = frozenset(
    {
        "title",
        "author",
        "copyright",
        "logo",
        "language",
        "exclude_patterns",
        "only_build_toc_files",
        "repository",
        "bibtex_bibfiles",
    }
)
#: Keys kept below a top-level section (Jupyter Book 1.x's ``html``, ``parse``, ``latex``).
SAFE_SECTION_KEYS: Mapping[str, frozenset[str]] = {
    "html": frozenset(
        {
            "favicon",
            "use_edit_page_button",
            "use_repository_button",
            "use_issues_button",
            "use_multitoc_numbering",
            "extra_footer",
            "extra_navbar",
            "home_page_in_navbar",
            "baseurl",
            "announcement",
        }
    ),
    "parse": frozenset(
        {
            "myst_enable_extensions",
            "myst_url_schemes",
            "myst_dmath_double_inline",
            "myst_heading_anchors",
            "myst_footnote_transition",
        }
    ),
    "latex": frozenset({"latex_documents", "latex_engine", "use_jupyterbook_latex"}),
}
#: Keys of ``sphinx: config:`` kept (presentation only: no key that runs notebooks, loads an
#: extension or a template, or copies files into the HTML: ``nb_execution_mode``,
#: ``extensions``, ``html_extra_path``, ``html_static_path``, ``templates_path``...).
SAFE_SPHINX_KEYS = frozenset(
    {
        "html_theme_options",
        "html_title",
        "html_short_title",
        "html_logo",
        "html_favicon",
        "html_last_updated_fmt",
        "html_show_copyright",
        "html_show_sphinx",
        "html_show_sourcelink",
        "html_copy_source",
        "html_sourcelink_suffix",
        "html_baseurl",
        "language",
        "numfig",
        "numfig_format",
        "numfig_secnum_depth",
        "math_number_all",
        "math_numfig",
        "mathjax3_config",
        "pygments_style",
        "suppress_warnings",
        "myst_heading_anchors",
        "myst_url_schemes",
        "myst_dmath_double_inline",
        "myst_footnote_transition",
        "nb_merge_streams",
        "nb_output_stderr",
        "nb_render_image_options",
        "bibtex_reference_style",
        "bibtex_default_style",
    }
)


def is_inside_book(value: Any) -> bool:
    """Return True if no string in ``value`` names a path outside the book (pure).

    A string is refused when it is an absolute path, starts with ``~``, has a
    ``..`` segment or is a ``file:`` URL; web links (``https://...``) are fine.
    Mappings and lists are checked item by item.
    """
    if isinstance(value, Mapping):
        return all(is_inside_book(k) and is_inside_book(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(is_inside_book(item) for item in value)
    if not isinstance(value, str):
        return True
    text = value.strip().replace("\\", "/")
    if text.lower().startswith("file:"):
        return False
    if "://" in text:
        return True
    return not (text.startswith(("/", "~")) or ".." in text.split("/"))


def plan_safe_config(user: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Return the allow-listed part of a book's ``_config.yml`` and the keys dropped (pure).

    Parameters
    ----------
    user : mapping
        The book's own ``_config.yml``.

    Returns
    -------
    (dict, list of str)
        The keys of :data:`SAFE_TOP_KEYS`, :data:`SAFE_SECTION_KEYS` and
        ``sphinx.config`` keys of :data:`SAFE_SPHINX_KEYS` whose values name
        no path outside the book (:func:`is_inside_book`); and the dotted
        names of every key left out (``sphinx.config.html_extra_path``),
        sorted.

    Raises
    ------
    BookError
        If the configuration is not a mapping or sets a key of :data:`REFUSED_KEYS`.
    """
    if not isinstance(user, Mapping):
        raise BookError(f"{CONFIG_FILE} must be a YAML mapping")
    for top, refused in REFUSED_KEYS:
        value = user.get(top)
        if isinstance(value, Mapping) and value.get(refused):
            raise BookError(
                f"{CONFIG_FILE} sets {top}.{refused}: coursehub does not load Python "
                "from a course's repository into the build"
            )
    safe: dict[str, Any] = {}
    dropped: list[str] = []

    def keep(name: str, value: Any, allowed: bool, into: dict[str, Any], key: str) -> None:
        if allowed and is_inside_book(value):
            into[key] = value
        else:
            dropped.append(name)

    for key, value in user.items():
        name = str(key)
        if name in SAFE_SECTION_KEYS and isinstance(value, Mapping):
            section: dict[str, Any] = {}
            for sub, item in value.items():
                keep(f"{name}.{sub}", item, sub in SAFE_SECTION_KEYS[name], section, sub)
            if section:
                safe[name] = section
        elif name == "sphinx" and isinstance(value, Mapping):
            config: dict[str, Any] = {}
            for sub, item in value.items():
                if sub == "config" and isinstance(item, Mapping):
                    for ckey, citem in item.items():
                        keep(f"sphinx.config.{ckey}", citem, ckey in SAFE_SPHINX_KEYS, config, ckey)
                else:
                    dropped.append(f"sphinx.{sub}")
            if config:
                safe["sphinx"] = {"config": config}
        elif name == "execute":
            dropped.extend(f"execute.{sub}" for sub in (value or {}) if isinstance(value, Mapping))
        else:
            keep(name, value, name in SAFE_TOP_KEYS, safe, name)
    return safe, sorted(dropped)


#: Jupyter Book 1.x's default MyST extensions (``jupyter_book/default_config.yml``).
DEFAULT_MYST_EXTENSIONS = ("colon_fence", "dollarmath", "linkify", "substitution", "tasklist")
#: MyST extensions a book may not turn on: ``substitution`` renders ``{{ ... }}`` in every
#: page with Jinja2 at build time (myst-parser's ``substitution`` extension, an unsandboxed
#: ``jinja2.Environment``), i.e. runs the page's code whatever the course's execute setting.
REFUSED_MYST_EXTENSIONS = frozenset({"substitution"})


def plan_myst_extensions(user: Any) -> tuple[list[str], bool]:
    """Return the MyST extensions a book gets and whether one of them was left out (pure).

    ``user`` is the book's ``parse.myst_enable_extensions`` (None: Jupyter
    Book's :data:`DEFAULT_MYST_EXTENSIONS`); the extensions of
    :data:`REFUSED_MYST_EXTENSIONS` are removed, as is anything not a string.

    >>> plan_myst_extensions(None)
    (['colon_fence', 'dollarmath', 'linkify', 'tasklist'], False)
    >>> plan_myst_extensions(["substitution", "deflist"])
    (['deflist'], True)
    """
    names = list(DEFAULT_MYST_EXTENSIONS) if user is None else user
    if not isinstance(names, list | tuple):
        return [n for n in DEFAULT_MYST_EXTENSIONS if n not in REFUSED_MYST_EXTENSIONS], True
    kept = [n for n in names if isinstance(n, str) and n not in REFUSED_MYST_EXTENSIONS]
    return kept, user is not None and len(kept) != len(names)


def plan_config(
    user: Mapping[str, Any],
    *,
    execute: bool,
    kernel: str | None,
    cell_timeout_s: float,
) -> tuple[dict[str, Any], list[str]]:
    """Return the book's ``_config.yml`` as built and the book's keys dropped from it.

    Parameters
    ----------
    user : mapping
        The book's own ``_config.yml``: only its allow-listed part is kept
        (:func:`plan_safe_config`).
    execute : bool
        The course's setting: ``execute_notebooks: force`` (run every notebook)
        if true, else ``"off"`` (stored outputs), whatever the book says;
        myst-nb's ``nb_execution_mode`` is never taken from the book.
    kernel : str or None
        The course's kernel spec name: every notebook runs with it
        (myst-nb's ``nb_kernel_rgx_aliases``), or None for the notebooks' own.
    cell_timeout_s : float
        Limit of one cell (``execute.timeout``), seconds.

    Returns
    -------
    (dict, list of str)
        A new configuration (a notebook that fails to execute fails the
        build: ``execute.raise_on_error``) and the dotted names of the
        book's keys left out, sorted.

    Raises
    ------
    BookError
        If the configuration is not a mapping or sets a key of :data:`REFUSED_KEYS`.
    """
    config, dropped = plan_safe_config(user)
    parse = dict(config.get("parse") or {})
    extensions, left_out = plan_myst_extensions(parse.get("myst_enable_extensions"))
    parse["myst_enable_extensions"] = extensions
    config["parse"] = parse
    if left_out:
        dropped = sorted({*dropped, "parse.myst_enable_extensions.substitution"})
    config["execute"] = {
        "execute_notebooks": "force" if execute else "off",
        "timeout": int(cell_timeout_s),
        "raise_on_error": True,
        "allow_errors": False,
    }
    if execute and kernel:
        sphinx = dict(config.get("sphinx") or {})
        sphinx_config = dict(sphinx.get("config") or {})
        sphinx_config["nb_kernel_rgx_aliases"] = {".*": kernel}
        sphinx["config"] = sphinx_config
        config["sphinx"] = sphinx
    return config, dropped


def render_dropped(dropped: Iterable[str]) -> str:
    """``"_config.yml: left out (not allowed in a course book): a, b"``, or ``""``."""
    names = ", ".join(dropped)
    return f"{CONFIG_FILE}: left out (not allowed in a course book): {names}" if names else ""


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
