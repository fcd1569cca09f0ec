"""Where a course's book lives on the course app's host, its settings and its state.

::

    BOOKS_DIR/                       (COURSEHUB_BOOKS_DIR, else DATA_DIR/books)
      <course_id>/
        settings.json                book folder, source folder, execute, public, limits
        state.json                   the last build: state, started, finished, log, commit, error
        build.lock                   held (flock) by the build that runs
        current -> builds/<id>/html  the book served (a symbolic link, switched by rename)
        builds/<id>/                 one build: source/ (a copy), out/ (jupyter-book's output)
        logs/<id>.log                each build's log

The settings are a small JSON file per course, written by ``coursehub book
settings`` (host administrators: notebook execution runs the course's code on
this host) and, for ``public`` only, by the course's teachers on the course page.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from coursehub.atomicfile import write_atomically
from coursehub.errors import CoursehubError, UsageError
from coursehub.resources.units import parse_mem
from coursehub.settings import check_course_id, data_dir

#: Default wall-clock limit of one build (seconds).
DEFAULT_TIMEOUT_S = 600.0
#: Default memory limit of one build.
DEFAULT_MEM_LIMIT = "2G"


class BookError(CoursehubError):
    """A book cannot be built: no configuration, a missing page, a failed or too long build."""


def books_root(environ: Mapping[str, str] | None = None) -> Path:
    """``COURSEHUB_BOOKS_DIR``, else ``books`` in coursehub's data directory (not created)."""
    env = os.environ if environ is None else environ
    if env.get("COURSEHUB_BOOKS_DIR"):
        return Path(env["COURSEHUB_BOOKS_DIR"]).expanduser()
    return data_dir(env) / "books"


@dataclass(frozen=True)
class BookPaths:
    """The files of one course's book below ``root`` (see the module's layout)."""

    root: Path
    course_id: str

    def __post_init__(self) -> None:
        check_course_id(self.course_id)

    @property
    def dir(self) -> Path:
        return self.root / self.course_id

    @property
    def settings(self) -> Path:
        return self.dir / "settings.json"

    @property
    def state(self) -> Path:
        return self.dir / "state.json"

    @property
    def lock(self) -> Path:
        return self.dir / "build.lock"

    @property
    def current(self) -> Path:
        """The symbolic link to the HTML of the book served."""
        return self.dir / "current"

    @property
    def builds(self) -> Path:
        return self.dir / "builds"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"


@dataclass(frozen=True)
class BookSettings:
    """A course's book settings.

    Attributes
    ----------
    folder
        The book's folder inside the material (``""``: its top), holding
        ``_config.yml`` and ``_toc.yml``.
    source_dir
        A folder of the host to build from while the course has no
        published git material (the demo; a course without a repository),
        or ``""``; published material comes first (docs/books.md).
    execute
        Run the notebooks during the build (``execute_notebooks: force``),
        with the course's kernel; off by default (their stored outputs are shown).
    public
        Serve the book to anyone, signed in or not; off by default (members only).
    build_on_update
        Build the book again after each material update that gives students
        a new commit ("Update now", ``coursehub material update``); off by
        default.
    timeout_s
        Wall-clock limit of one build, seconds.
    mem_limit
        Memory limit of one build (``"2G"``).
    n_threads
        Threads of the build job.
    """

    folder: str = ""
    source_dir: str = ""
    execute: bool = False
    public: bool = False
    build_on_update: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    mem_limit: str = DEFAULT_MEM_LIMIT
    n_threads: int = 1


def parse_settings(data: Any, where: str) -> BookSettings:
    """Return the :class:`BookSettings` of a JSON object (missing keys: defaults).

    Raises
    ------
    UsageError
        Not an object, an unknown key, a value of the wrong type, a folder that
        leaves the material (absolute or with ``..``), a non-positive limit.
    """
    if not isinstance(data, dict):
        raise UsageError(f"{where}: the book settings must be a JSON object")
    types = {f.name: f.type for f in fields(BookSettings)}
    unknown = sorted(set(data) - set(types))
    if unknown:
        raise UsageError(f"{where}: unknown book setting(s) {', '.join(unknown)}")
    expected = {"str": (str,), "bool": (bool,), "float": (int, float), "int": (int,)}
    for key, value in data.items():
        ok = expected[str(types[key])]
        if not isinstance(value, ok) or (isinstance(value, bool) and bool not in ok):
            raise UsageError(f"{where}: book setting {key} must be a {types[key]}, got {value!r}")
    settings = BookSettings(**data)
    folder = Path(settings.folder)
    if folder.is_absolute() or ".." in folder.parts:
        raise UsageError(f"{where}: book folder {settings.folder!r} must be inside the material")
    if settings.timeout_s <= 0 or settings.n_threads < 1:
        raise UsageError(f"{where}: timeout_s and n_threads must be positive")
    try:
        parse_mem(settings.mem_limit)
    except (UsageError, ValueError) as exc:
        raise UsageError(f"{where}: book setting mem_limit: {exc}") from None
    return settings


def read_settings(paths: BookPaths) -> BookSettings:
    """The course's settings (defaults when it has none).

    Raises
    ------
    UsageError
        If the file is not valid JSON or :func:`parse_settings` refuses it.
    """
    try:
        text = paths.settings.read_text(encoding="utf-8")
    except FileNotFoundError:
        return BookSettings()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{paths.settings}: not JSON ({exc})") from None
    return parse_settings(data, str(paths.settings))


def write_settings(paths: BookPaths, settings: BookSettings) -> None:
    """Write the settings file atomically (mode 0644: the course app reads it)."""
    text = json.dumps(asdict(settings), indent=2, sort_keys=True) + "\n"
    write_atomically(paths.settings, text, mode=0o644)


def read_state(paths: BookPaths) -> dict[str, Any]:
    """The last build's state file; ``{"state": "none"}`` before any build or if unreadable."""
    try:
        data = json.loads(paths.state.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {"state": "none"}
    return data if isinstance(data, dict) else {"state": "none"}


def write_state(paths: BookPaths, state: Mapping[str, Any]) -> None:
    """Write the state file atomically."""
    write_atomically(paths.state, json.dumps(dict(state), indent=2) + "\n", mode=0o644)
