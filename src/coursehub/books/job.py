"""The runner job of a book build: ``python -m coursehub.books.job BOOK OUT``.

Runs Jupyter Book 1.x's command line (``jupyter-book build BOOK --path-output
OUT --builder html``, https://jupyterbook.org/en/stable/reference/cli.html) in
the job's interpreter, under the runner's limits; exits with its status.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Build the book in ``argv[0]`` into ``argv[1]``; return jupyter-book's exit status."""
    if len(argv) != 2:
        print("usage: python -m coursehub.books.job BOOK OUT", file=sys.stderr)
        return 2
    from jupyter_book.cli.main import main as jupyter_book

    try:
        jupyter_book(["build", argv[0], "--path-output", argv[1], "--builder", "html"])
    except SystemExit as exc:  # click ends with sys.exit(status)
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
