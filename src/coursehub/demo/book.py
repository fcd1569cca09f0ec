"""The demo course's book: an introduction page and the pendulum notebook, built at first start.

The book's source is laid out in ``DATA_DIR/book-source/<course_id>``
(``_config.yml``, ``_toc.yml`` and ``intro.md`` of :data:`BOOK_FILES`, and a
copy of the pendulum notebook), named as the course's book source folder
(:class:`coursehub.books.settings.BookSettings` ``source_dir``), and built in
the background (:func:`coursehub.books.background.start_build`): the demo
does not wait for it, the course page shows its state.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from coursehub.books.background import start_build
from coursehub.books.settings import BookPaths, BookSettings, books_root, write_settings

#: The book's own files, beside this module.
BOOK_FILES = Path(__file__).resolve().parent / "book"
#: The notebook of the book's one chapter (the pendulum course material).
NOTEBOOK = Path(__file__).resolve().parents[1] / "pendulum" / "notebooks" / "double_pendulum.ipynb"


def prepare_demo_book(data_dir: Path, course_id: str, books_dir: Path | None = None) -> BookPaths:
    """Lay out the demo book's source and the course's book settings; return its paths.

    The source is rewritten on every call (it is the package's); the
    settings are written only if the course has none (an administrator's
    choice is kept).
    """
    source = data_dir / "book-source" / course_id
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(BOOK_FILES, source)
    shutil.copyfile(NOTEBOOK, source / "double_pendulum.ipynb")
    paths = BookPaths(books_dir or books_root({"COURSEHUB_DATA_DIR": str(data_dir)}), course_id)
    if not paths.settings.exists():
        write_settings(paths, BookSettings(source_dir=str(source)))
    return paths


def start_demo_book(data_dir: Path, course_id: str) -> bool:
    """Prepare the demo book and start its build in the background (False if one runs)."""
    return start_build(prepare_demo_book(data_dir, course_id))
