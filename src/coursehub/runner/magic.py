"""``%coursehub_run``: the runner as an IPython line magic.

``%load_ext coursehub.runner.magic`` then ``%coursehub_run --threads 2 train.py model.pt 100``
(options as ``coursehub run``; ``--`` before the script is optional). The
output streams into the cell; bad input prints one line, no traceback. The
last result is kept in the user namespace as ``coursehub_last_run``. The
backend is the server's default (``COURSEHUB_RUNNER_BACKEND``), with the
course's Slurm partition, account and QOS (``COURSEHUB_SLURM_*``, set by the
spawner from the course profile) unless ``--backend``/``--partition``... say otherwise.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, NoReturn

from coursehub.errors import CoursehubError, UsageError
from coursehub.runner.cli import add_run_arguments, backend_options, spec_options


class MagicArgumentParser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_magic_parser() -> MagicArgumentParser:
    """Return the parser of ``%coursehub_run``'s options."""
    parser = MagicArgumentParser(prog="%coursehub_run", add_help=False)
    add_run_arguments(parser)
    return parser


def coursehub_run(line: str, shell: Any = None) -> Any:
    """Run the script of ``line`` through the runner; return nothing (the output is printed)."""
    from coursehub.runner.api import make_backend, run

    try:
        args = build_magic_parser().parse_args(shlex.split(line))
        script, script_args, options = spec_options(args)
        backend = make_backend(**backend_options(args))
        result = run(script, script_args, backend=backend, **options)
    except CoursehubError as exc:
        print(f"coursehub: error: {exc}", file=sys.stderr)
        return None
    if shell is not None:
        shell.user_ns["coursehub_last_run"] = result
    return None


def register_magic(ipython: Any) -> None:
    """Register ``%coursehub_run`` on an IPython shell."""

    def magic(line: str) -> Any:
        return coursehub_run(line, ipython)

    ipython.register_magic_function(magic, magic_kind="line", magic_name="coursehub_run")


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%coursehub_run`` (``%load_ext coursehub.runner.magic``)."""
    register_magic(ipython)
