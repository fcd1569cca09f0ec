"""A book's ``_config.yml`` as built: its allow-listed keys, the course's execution (pure).

Jupyter Book 1.x reads ``_config.yml``
(https://jupyterbook.org/en/stable/customize/config.html); of the book's own
keys only the presentation ones are kept, each naming no path outside the
book; execution and the kernel are the course's settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from coursehub.books.settings import BookError

CONFIG_FILE = "_config.yml"
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
