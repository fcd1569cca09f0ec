"""``coursehub material update``: the update, then the course's book where it asks for one.

The material package may not import the books (they read the material), so
this command lives above both: the update of :mod:`coursehub.material.cli`,
then, for each course whose update gave students a new commit and whose book
settings say ``build_on_update``, a detached build (:func:`rebuild_book`). The
course app's "Update now" (:mod:`coursehub.web.materialjobs`) calls
:func:`rebuild_book` too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coursehub.material.cli import add_update_arguments, run_update_command

if TYPE_CHECKING:
    from coursehub.material.service import UpdateOutcome

#: One line for ``coursehub material --help``.
HELP = (
    "fetch the repository and publish it to students now (then rebuild the book "
    "where the course asks for it)"
)


def register(commands: Any) -> None:
    """Add ``update`` to the sub-commands of ``coursehub material`` (``commands``)."""
    parser = commands.add_parser(
        "update",
        help=HELP,
        description="Update a course's mirror (or every course's with --all, for a timer). "
        "A failure keeps the last good material; the exit status is then 2 (1 with --all).",
    )
    add_update_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``coursehub material update``, then start the book builds the courses ask for.

    Returns
    -------
    int
        The update's exit status (:func:`coursehub.material.cli.run_update_command`).
    """
    from coursehub.books.settings import books_root
    from coursehub.material.layout import material_root

    root = books_root()
    material_dir = Path(args.material_dir or material_root())

    def rebuild(outcome: UpdateOutcome) -> None:
        if rebuild_book(outcome, root, material_dir):
            print(f"{outcome.course_id}: book build started (see coursehub book show)")

    return run_update_command(args, on_published=rebuild)


def rebuild_book(
    outcome: UpdateOutcome,
    books_dir: Path,
    material_dir: Path,
    shared_root: Path | None = None,
) -> bool:
    """After a course's material update, start its book build where it asks for one.

    Parameters
    ----------
    outcome : UpdateOutcome
        The update that published (its ``course_id`` and ``changed``).
    books_dir : Path
        The root of the built books (:func:`coursehub.books.settings.books_root`).
    material_dir : Path
        The root of the material mirrors, which the build reads.
    shared_root : Path, optional
        The course data root the build may read (the course app's ``SHARED_ROOT``).

    Returns
    -------
    bool
        True when a build started: the update gave students a new commit, the
        course's book settings say ``build_on_update`` and no build was running
        (:func:`coursehub.books.background.build_if_asked`).
    """
    from coursehub.books.background import build_if_asked
    from coursehub.books.settings import BookPaths

    paths = BookPaths(books_dir, outcome.course_id)
    return build_if_asked(
        paths, outcome.changed, material_dir=material_dir, shared_root=shared_root
    )
