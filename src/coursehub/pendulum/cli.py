"""``coursehub pendulum ...``: generate, train, evaluate (and pipeline, wired from above).

Each sub-command's arguments are declared by ``add_arguments(parser)`` in its
own module and carried out by that module's ``run(args) -> int``; the module
is imported only when its sub-command runs. Sub-commands carried out by a
module above this package (``pipeline``, :mod:`coursehub.pipelines.pendulum`,
which drives pendulum through the runner) are passed in by the caller,
:mod:`coursehub.cli`, so that this package imports nothing above it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping
from typing import Any

# sub-command -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "generate": ("coursehub.pendulum.dataset", "simulate trajectories and write a dataset file"),
    "train": ("coursehub.pendulum.train", "train the LSTM forecaster with explicit threads"),
    "evaluate": ("coursehub.pendulum.evaluate", "DP-Buffat-v1 metrics, baselines and plots"),
}


def register(subparsers: Any, extra: Mapping[str, tuple[str, str]] | None = None) -> None:
    """Add ``coursehub pendulum`` and its sub-commands to ``subparsers``.

    Parameters
    ----------
    subparsers
        The ``coursehub`` command's sub-parsers action.
    extra : mapping, optional
        More sub-commands, ``name -> (module, one-line help)``, declared and
        run the same way (``add_arguments`` and ``run`` of the module).
    """
    parser = subparsers.add_parser("pendulum", help="the double-pendulum teaching workload")
    commands = parser.add_subparsers(dest="pendulum_command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in {**SUBCOMMANDS, **(extra or {})}.items():
        module = importlib.import_module(module_name)
        sub = commands.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub)
        sub.set_defaults(func=_runner(module_name))


def _runner(module_name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        return int(importlib.import_module(module_name).run(args))

    return run
