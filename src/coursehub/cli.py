"""The ``coursehub`` command: one entry point with a sub-command per part.

Each part owns a ``cli`` module with a ``register(subparsers)`` function that
adds its sub-command and sets ``func`` on the parsed namespace. Those modules
import nothing heavy at module level, so ``coursehub --help`` never loads
torch, scipy or matplotlib.

Errors a user can meet (:class:`coursehub.errors.CoursehubError`) are printed
as one line, ``coursehub: error: ...``, with exit status 2. A write refused
by the storage (``OSError`` ENOSPC, EDQUOT or EROFS, from any command) is one line
too, with exit status 1 (:func:`coursehub.errors.describe_storage_full`). Any
other exception is a bug and keeps its traceback: library errors a command
can meet are turned into a :class:`~coursehub.errors.CoursehubError` where
that command calls the library (e.g. ``coursehub db upgrade`` and Alembic).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from coursehub import __version__
from coursehub.errors import CoursehubError, describe_storage_full, is_storage_refused

# sub-command -> module that registers it, in the order shown by --help.
COMMAND_MODULES: tuple[str, ...] = (
    "coursehub.pendulum.cli",
    "coursehub.runner.cli",
    "coursehub.bench.cli",
    "coursehub.catalog.cli",
    "coursehub.admin.cli",
    "coursehub.material.cli",
    "coursehub.web.cli",
    "coursehub.hub.cli",
    "coursehub.grading.cli",
    "coursehub.demo.cli",
    "coursehub.coursedata.cli",
    "coursehub.courseenv.cli",
    "coursehub.books.cli",
    "coursehub.usage.cli",
    "coursehub.lti.cli",
)
# sub-commands of a part carried out by a module above it (it drives the part
# through another one): part's cli module -> {name: (module, one-line help)}.
LIFTED_SUBCOMMANDS: dict[str, dict[str, tuple[str, str]]] = {
    "coursehub.pendulum.cli": {
        "pipeline": (
            "coursehub.pipelines.pendulum",
            "generate, train through the runner and evaluate at a small size",
        ),
    },
    "coursehub.material.cli": {
        "update": (
            "coursehub.books.materialhook",
            "fetch the repository and publish it to students now (then rebuild the book "
            "where the course asks for it)",
        ),
    },
    "coursehub.hub.cli": {
        "sync": (
            "coursehub.web.aftersync",
            "sync the catalog into the hub, then the team's shares and data folders",
        ),
    },
}


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every part's sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="coursehub",
        description="Teach computational AI on shared JupyterHub servers.",
    )
    parser.add_argument("--version", action="version", version=f"coursehub {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        if name in LIFTED_SUBCOMMANDS:
            module.register(subparsers, LIFTED_SUBCOMMANDS[name])
        else:
            module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status.

    Returns
    -------
    int
        0 on success, 2 on a user error (bad argument, missing or corrupt
        file), 1 on a full disk or quota, or the status a sub-command chose.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        status = func(args)
    except CoursehubError as exc:
        print(f"coursehub: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if not is_storage_refused(exc):
            raise
        print(f"coursehub: error: {describe_storage_full(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("coursehub: interrupted", file=sys.stderr)
        return 130
    return int(status or 0)
