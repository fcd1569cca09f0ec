"""``coursehub material update`` carried out with the books: a new commit rebuilds the book.

The material package may not import the books (they read the material), so
its ``update`` sub-command is lifted here (:data:`coursehub.cli.LIFTED_SUBCOMMANDS`):
the same update, then, for each course whose update gave students a new
commit and whose book settings say ``build_on_update``, a detached build
(:func:`coursehub.books.background.build_if_asked`). The course app's
"Update now" does the same (:mod:`coursehub.web.materialjobs`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coursehub.books.background import build_if_asked
from coursehub.books.settings import BookPaths, books_root
from coursehub.material.cli import run_update_command
from coursehub.material.layout import material_root
from coursehub.material.service import UpdateOutcome


def run(args: argparse.Namespace) -> int:
    """Run ``coursehub material update``, then start the book builds the courses ask for."""
    root = books_root()
    material_dir = Path(args.material_dir or material_root())

    def rebuild(outcome: UpdateOutcome) -> None:
        paths = BookPaths(root, outcome.course_id)
        if build_if_asked(paths, outcome.changed, material_dir=material_dir):
            print(f"{outcome.course_id}: book build started (see coursehub book show)")

    return run_update_command(args, on_published=rebuild)
