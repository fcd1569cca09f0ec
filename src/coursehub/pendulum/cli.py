"""``coursehub pendulum ...``: generate, train, evaluate.

Each sub-command's arguments are declared by ``add_arguments(parser)`` in its
own module and carried out by that module's ``run(args) -> int``. Those
modules import numpy at most at module level (torch, scipy and matplotlib
inside functions), so ``coursehub --help`` stays fast. ``pendulum pipeline``,
which drives this package through the runner, is a row of its own in
:data:`coursehub.cli.COMMANDS` (:mod:`coursehub.usecases.pendulum_pipeline`),
so that this package imports nothing above it.
"""

from __future__ import annotations

from typing import Any

from coursehub.pendulum import dataset, evaluate, train


def register(subparsers: Any) -> Any:
    """Add ``coursehub pendulum`` with ``generate``, ``train`` and ``evaluate``.

    Returns
    -------
    argparse._SubParsersAction
        The sub-commands of ``coursehub pendulum``, for the rows that add to them.
    """
    parser = subparsers.add_parser("pendulum", help="the double-pendulum teaching workload")
    commands = parser.add_subparsers(dest="pendulum_command", metavar="COMMAND", required=True)
    for name, module, help_text in (
        ("generate", dataset, "simulate trajectories and write a dataset file"),
        ("train", train, "train the LSTM forecaster with explicit threads"),
        ("evaluate", evaluate, "DP-Buffat-v1 or -v2 (--version 2) metrics, baselines and plots"),
    ):
        sub = commands.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub)
        sub.set_defaults(func=module.run)
    return commands
