"""The ``coursehub`` command: one entry point, one table of its commands.

:data:`COMMANDS` names every command and the function that registers it, in
the order ``coursehub --help`` shows them, as nbgrader's ``nbgraderapp.py``
names every verb and its class. A part's ``cli`` module registers its own
commands; a command that joins several parts (``hub sync``, ``material
update``, ``pendulum pipeline``) lives in :mod:`coursehub.usecases`, above
them, and adds itself to its part's sub-commands. No register function
imports anything heavy, so ``coursehub --help`` never loads torch, scipy or
matplotlib.

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
import sys
from collections.abc import Callable, Sequence
from typing import Any

from coursehub import __version__
from coursehub.accounts import cli as accounts_cli
from coursehub.admin import cli as admin_cli
from coursehub.backup import cli as backup_cli
from coursehub.bench import cli as bench_cli
from coursehub.books import cli as books_cli
from coursehub.catalog import cli as catalog_cli
from coursehub.coursedata import cli as coursedata_cli
from coursehub.courseenv import cli as courseenv_cli
from coursehub.demo import cli as demo_cli
from coursehub.deploy import cli as deploy_cli
from coursehub.doctor import cli as doctor_cli
from coursehub.errors import CoursehubError, describe_storage_full, is_storage_refused
from coursehub.grading import cli as grading_cli
from coursehub.grading import examcli as exam_cli
from coursehub.homequota import cli as homequota_cli
from coursehub.hub import cli as hub_cli
from coursehub.lti import cli as lti_cli
from coursehub.material import cli as material_cli
from coursehub.pendulum import cli as pendulum_cli
from coursehub.runner import cli as runner_cli
from coursehub.upgrade import cli as upgrade_cli
from coursehub.usage import cli as usage_cli
from coursehub.usecases import hub_sync, material_update, pendulum_pipeline
from coursehub.web import cli as web_cli

#: A function that adds a command to an ``argparse`` sub-parsers action; a command
#: with sub-commands may return its own sub-parsers action for the rows below it.
Register = Callable[[Any], Any]

#: Every command, in ``--help`` order: (name, register). A name of two words
#: (``"hub sync"``) adds a sub-command to the command named by its first word,
#: whose row comes before it and whose register returned its sub-parsers action.
COMMANDS: tuple[tuple[str, Register], ...] = (
    ("pendulum", pendulum_cli.register),
    ("pendulum pipeline", pendulum_pipeline.register),
    ("run", runner_cli.register),
    ("bench", bench_cli.register),
    ("db", catalog_cli.register_db),
    ("roster", catalog_cli.register_roster),
    ("year", admin_cli.register_year),
    ("portal", admin_cli.register_portal),
    ("course", admin_cli.register_course),
    ("material", material_cli.register),
    ("material update", material_update.register),
    ("web", web_cli.register),
    ("hub", hub_cli.register),
    ("hub sync", hub_sync.register),
    ("grading", grading_cli.register),
    ("exam", exam_cli.register),
    ("demo", demo_cli.register),
    ("data", coursedata_cli.register),
    ("accounts", accounts_cli.register),
    ("home", homequota_cli.register),
    ("env", courseenv_cli.register),
    ("book", books_cli.register),
    ("usage", usage_cli.register),
    ("lti", lti_cli.register),
    ("doctor", doctor_cli.register),
    ("backup", backup_cli.register_backup),
    ("restore", backup_cli.register_restore),
    ("deploy", deploy_cli.register),
    ("upgrade", upgrade_cli.register),
)


def build_parser(commands: Sequence[tuple[str, Register]] = COMMANDS) -> argparse.ArgumentParser:
    """Return the top-level parser with every row of ``commands`` registered.

    Parameters
    ----------
    commands : sequence of (str, callable), optional
        The table to register (default :data:`COMMANDS`).

    Returns
    -------
    argparse.ArgumentParser
        The ``coursehub`` parser; each leaf command sets ``func`` on the namespace.

    Raises
    ------
    ValueError
        A two-word row whose first word has no row before it that returned a
        sub-parsers action (a mistake in the table, not a user's).
    """
    parser = argparse.ArgumentParser(
        prog="coursehub",
        description="Teach computational AI on shared JupyterHub servers.",
    )
    parser.add_argument("--version", action="version", version=f"coursehub {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    parts: dict[str, Any] = {}
    for name, register in commands:
        part, _, verb = name.partition(" ")
        if not verb:
            parts[part] = register(subparsers)
        elif parts.get(part) is None:
            raise ValueError(f"command {name!r}: no row for {part!r} before it")
        else:
            register(parts[part])
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
