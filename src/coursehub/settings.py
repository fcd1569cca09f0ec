"""coursehub's environment settings, its two base folders and the course-id rule.

The bottom module: it imports only :mod:`coursehub.errors` and the standard
library, so that any part of coursehub can ask it.

- :data:`SETTINGS` (read from ``settings.toml`` beside this module) lists
  every ``COURSEHUB_*`` environment variable coursehub reads, or sets for a
  process it starts (a job, a git command, a hub service), with its default
  and what it does; :func:`render_settings_table`
  renders it as the Markdown table of ``docs/settings.md``.
- :func:`data_dir` and :func:`runs_dir` resolve the data directory and the
  runner's runs directory.
- :data:`COURSE_ID_RE` and :func:`check_course_id` are the one rule for a
  course id: every id the catalog makes obeys it, and an id that obeys it is
  one safe path component (no ``/``, never ``.`` or ``..``, no leading ``-``).

The course web app also reads ``COURSEHUB_<KEY>`` for each key of its Flask
configuration (``app.config.from_prefixed_env("COURSEHUB")``: a value that
parses as JSON is taken as JSON, e.g. ``true`` or ``300``); those keys are
listed too. The app's other ``HUB_*`` keys come from the hub's
``JUPYTERHUB_*`` variables (:data:`coursehub.web.config.HUB_VARIABLES`),
which win over a ``COURSEHUB_HUB_*`` of the same name, and are not listed.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from coursehub.errors import UsageError

__all__ = [
    "COURSE_ID_MAX_LENGTH",
    "COURSE_ID_RE",
    "COURSE_ID_RULE",
    "SETTINGS",
    "Setting",
    "check_course_id",
    "data_dir",
    "demo_data_dir",
    "load_settings",
    "render_settings_table",
    "runs_dir",
    "setting",
]


@dataclass(frozen=True)
class Setting:
    """One ``COURSEHUB_*`` environment variable.

    Attributes
    ----------
    name : str
        The variable's name, e.g. ``"COURSEHUB_DATA_DIR"``.
    default : str
        What applies when it is unset, as a reader sees it (Markdown), e.g.
        ``"`~/.local/share/coursehub`"`` or ``"unset"``.
    meaning : str
        One sentence: what it does, who reads it and, for a variable that
        coursehub sets for a child process, who sets it for whom.
    """

    name: str
    default: str
    meaning: str


#: The file of the table, beside this module: one ``[[setting]]`` per variable.
SETTINGS_FILE = Path(__file__).with_name("settings.toml")


def load_settings(path: Path = SETTINGS_FILE) -> tuple[Setting, ...]:
    """Read the table of ``COURSEHUB_*`` variables from a TOML file.

    Parameters
    ----------
    path : pathlib.Path, optional
        A TOML file (:mod:`tomllib`) holding an array of tables ``[[setting]]``, each
        with the strings ``name``, ``default`` and ``meaning``; default
        :data:`SETTINGS_FILE`.

    Returns
    -------
    tuple of Setting
        The rows in file order.

    Raises
    ------
    ValueError
        If a row lacks one of the three keys, holds another key or a non-string, or
        names a variable twice; the message gives the row's number (from 1) and name.
    tomllib.TOMLDecodeError
        If the file is not valid TOML.
    """
    with path.open("rb") as stream:
        rows = tomllib.load(stream).get("setting", [])
    table: list[Setting] = []
    for number, row in enumerate(rows, start=1):
        keys = set(row) if isinstance(row, dict) else set()
        if keys != _FIELDS or not all(isinstance(row[key], str) for key in _FIELDS):
            label = row.get("name", "?") if keys else repr(row)
            raise ValueError(
                f"{path.name}: setting {number} ({label}) "
                f"must have exactly the strings {sorted(_FIELDS)}, got {sorted(keys)}"
            )
        if any(done.name == row["name"] for done in table):
            raise ValueError(f"{path.name}: setting {number} names {row['name']} twice")
        table.append(Setting(row["name"], row["default"], row["meaning"]))
    return tuple(table)


_FIELDS = frozenset({"name", "default", "meaning"})
#: Every ``COURSEHUB_*`` variable, grouped by subject (paths, catalog, course app, hub,
#: runner, runner jobs, sandbox, grading, material, books, LTI, usage, demo), read from
#: :data:`SETTINGS_FILE` once at import.
SETTINGS: tuple[Setting, ...] = load_settings()

_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """Return the row of :data:`SETTINGS` named ``name``.

    Parameters
    ----------
    name : str
        A variable name, e.g. ``"COURSEHUB_DATA_DIR"``.

    Returns
    -------
    Setting
        Its row.

    Raises
    ------
    KeyError
        If no row has that name; the message says so and how many rows there are.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"{name!r} is not a coursehub setting (coursehub.settings.SETTINGS lists "
            f"{len(SETTINGS)} COURSEHUB_* variables)"
        ) from None


def _cell(text: str) -> str:
    """Return ``text`` safe in one Markdown table cell (``|`` escaped, one line)."""
    return " ".join(text.split()).replace("|", "\\|")


def render_settings_table() -> str:
    """Return :data:`SETTINGS` as a Markdown table, one row per variable, in table order.

    Returns
    -------
    str
        The header ``| Variable | Default | Meaning |``, its separator line, then one
        line per setting (the name in backquotes); lines end with ``\\n``.
    """
    lines = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    lines += [f"| `{s.name}` | {_cell(s.default)} | {_cell(s.meaning)} |" for s in SETTINGS]
    return "\n".join(lines) + "\n"


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return coursehub's data directory (not created).

    ``COURSEHUB_DATA_DIR`` if set and non-empty, else ``$XDG_DATA_HOME/coursehub``
    (``XDG_DATA_HOME`` set and non-empty), else ``~/.local/share/coursehub`` (the XDG
    base-directory default); ``~`` is expanded in either variable. Every part of
    coursehub asks this function (the catalog's SQLite file, the material, books, LTI key).

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; None: ``os.environ``. The home directory of the
        last fallback and of ``~`` is the process's (:meth:`pathlib.Path.home`,
        :meth:`pathlib.Path.expanduser`), not read from ``environ``.

    Returns
    -------
    pathlib.Path
        The folder, absolute unless a variable holds a relative path.
    """
    env = os.environ if environ is None else environ
    if env.get("COURSEHUB_DATA_DIR"):
        return Path(env["COURSEHUB_DATA_DIR"]).expanduser()
    xdg = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "coursehub"


def demo_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the folder of ``coursehub demo`` when ``--data-dir`` is not given (not created).

    ``COURSEHUB_DATA_DIR`` if set and non-empty (``~`` expanded): the demo is then the
    whole installation; else ``demo`` below :func:`data_dir`, so that a demo never
    writes into the catalog of a real installation of the same account.

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; None: ``os.environ``.

    Returns
    -------
    pathlib.Path
        The folder.
    """
    env = os.environ if environ is None else environ
    if env.get("COURSEHUB_DATA_DIR"):
        return data_dir(env)
    return data_dir(env) / "demo"


def runs_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the runner's runs directory, where job logs and pid files go (not created).

    ``COURSEHUB_RUNS_DIR`` if set and non-empty (taken as it is: ``~`` is *not*
    expanded), else ``~/.cache/coursehub/runs`` (``XDG_CACHE_HOME`` is not read).
    The runner and the busy-activity server extension both ask this function.

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read; None: ``os.environ``. The home directory of the
        fallback is the process's (:meth:`pathlib.Path.home`).

    Returns
    -------
    pathlib.Path
        The folder.
    """
    env = os.environ if environ is None else environ
    configured = env.get("COURSEHUB_RUNS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "coursehub" / "runs"


#: Longest course id, in characters: the catalog's ``Course.course_id`` column (``String(64)``).
COURSE_ID_MAX_LENGTH = 64
#: A course id: 1 to 64 lower-case ASCII letters, digits and ``-``, the first a letter or a
#: digit, nothing else (``\Z``: not even a final newline, which ``$`` would let through).
#: Every id the catalog makes (``coursehub.catalog.courses.make_course_id``: a slug of
#: the UE code, ``-``, the start year, e.g. ``mlmeca-2025``) matches it, and a match is one
#: safe path component, hub group suffix and Unix name part: no ``/``, no ``.``, no
#: leading ``-``, no upper case. Use it with ``match`` or ``fullmatch``.
COURSE_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}\Z")
#: The rule of :data:`COURSE_ID_RE` in words, for messages.
COURSE_ID_RULE = (
    f"1-{COURSE_ID_MAX_LENGTH} lower-case letters a-z, digits 0-9 or '-', "
    "starting with a letter or digit"
)
#: Longest part of a refused value that a message quotes.
_SHOWN = 80


def check_course_id(course_id: str, where: str = "course id") -> str:
    """Return ``course_id`` if it obeys :data:`COURSE_ID_RE`; raise UsageError if not.

    Parameters
    ----------
    course_id : str
        The value to check (not stripped: white space is refused).
    where : str, optional
        What the value is, for the message: ``"--course"``, ``"URL"``... (default
        ``"course id"``).

    Returns
    -------
    str
        ``course_id`` itself.

    Raises
    ------
    coursehub.errors.UsageError
        If it is not a string or not a course id (empty, too long, upper case, ``/``,
        ``.``, ``..``, white space...); the message names ``where``, the value (its
        first 80 characters) and :data:`COURSE_ID_RULE`.
    """
    if isinstance(course_id, str) and COURSE_ID_RE.match(course_id):
        return course_id
    shown = repr(course_id[:_SHOWN]) if isinstance(course_id, str) else repr(course_id)
    if isinstance(course_id, str) and len(course_id) > _SHOWN:
        shown += f"... ({len(course_id)} characters)"
    raise UsageError(f"{where} {shown} is not a course id: {COURSE_ID_RULE}")
