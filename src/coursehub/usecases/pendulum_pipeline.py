"""Generate a small dataset, train in a fresh interpreter, evaluate: the whole workload, small.

``coursehub pendulum pipeline [--out-dir DIR] [--n-trajectories 60] [--epochs 2] [--threads N]``

Training goes through the runner (:func:`coursehub.runner.api.run`) as
``coursehub run --threads N -- -m coursehub.pendulum.train ...`` would: a
fresh interpreter whose environment carries the thread variables before
torch loads, admitted only when N CPU slots are free on this machine, which
gives back all of its memory (GPU included) when it exits (a CUDA context is
freed only with its process; ``torch.cuda.empty_cache`` releases cached
blocks, not the context: PyTorch docs, "CUDA semantics", memory management).
Its output, then the runner's one-line summary, stream to standard output.

It lives in :mod:`coursehub.usecases`, above both ``pendulum`` and
``runner``, so that the pendulum package never imports the runner; its row
in :data:`coursehub.cli.COMMANDS` adds it to ``coursehub pendulum``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError, UsageError
from coursehub.resources.cpus import effective_cpus

#: The training module, run by the runner as ``python -m``.
TRAIN_MODULE = "coursehub.pendulum.train"
#: One line for ``coursehub pendulum --help``.
HELP = "generate, train through the runner and evaluate at a small size"


def register(commands: Any) -> None:
    """Add ``pipeline`` to the sub-commands of ``coursehub pendulum`` (``commands``)."""
    parser = commands.add_parser("pipeline", help=HELP, description=HELP)
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``coursehub pendulum pipeline``."""
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=Path("pendulum-demo"),
        metavar="DIR",
        help="folder for data, model, metrics and plot (pendulum-demo)",
    )
    parser.add_argument("--n-trajectories", type=int, default=60, help="default: 60")
    parser.add_argument("--epochs", type=int, default=2, help="default: 2")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="training threads (default: the usable CPUs, at most 2)",
    )
    parser.add_argument(
        "--max-windows",
        type=int,
        default=None,
        metavar="N",
        help="training windows per epoch (default: all)",
    )
    parser.add_argument("--seed", type=int, default=0, help="data and training seed (0)")


def plan_train_args(out_dir: Path, args: argparse.Namespace, n_threads: int) -> list[str]:
    """Return the training module's arguments: the course's interface plus the data file and size.

    ``MODEL_FILE N_EPOCHS N_THREADS`` (files in ``out_dir``), then ``--data``,
    ``--force``, ``--seed`` and, when given, ``--max-windows``.
    """
    return [
        str(out_dir / "model.pt"),
        str(args.epochs),
        str(n_threads),
        "--data",
        str(out_dir / "pendulum.npz"),
        "--force",
        "--seed",
        str(args.seed),
    ] + ([] if args.max_windows is None else ["--max-windows", str(args.max_windows)])


def train_through_runner(out_dir: Path, args: argparse.Namespace, n_threads: int) -> None:
    """Train in a fresh interpreter through the runner; its output and summary go to stdout.

    Raises
    ------
    UsageError
        The runner refuses the job (more threads than this machine's CPU budget).
    CoursehubError
        The training ended with a non-zero status or was stopped; the message
        names the runner's log of it.
    """
    from coursehub.runner.api import run as run_job

    result = run_job(
        TRAIN_MODULE,
        plan_train_args(out_dir, args, n_threads),
        module=True,
        n_threads=n_threads,
        name="pendulum-train",
    )
    if not result.ok:
        status = result.killed_reason or f"exit status {result.returncode}"
        raise CoursehubError(f"training failed ({status}): see {result.log_path}")


def run(args: argparse.Namespace) -> int:
    """Generate, train (through the runner), evaluate; print where the results are."""
    from coursehub.pendulum.datafile import save_dataset
    from coursehub.pendulum.dataset import generate_dataset

    if args.n_trajectories < 10:
        raise UsageError(f"--n-trajectories={args.n_trajectories} is too small: use >= 10")
    n_threads = args.threads or max(1, min(2, int(effective_cpus())))
    if args.epochs < 1 or n_threads < 1:
        raise UsageError("--epochs and --threads must be >= 1")
    out = args.out_dir
    print(f"1/3 simulating {args.n_trajectories} trajectories -> {out / 'pendulum.npz'}")
    ds = generate_dataset(args.n_trajectories, seed=args.seed)
    save_dataset(ds, out / "pendulum.npz", overwrite=True)
    print(f"2/3 training through the runner: fresh interpreter, {n_threads} thread(s)", flush=True)
    train_through_runner(out, args, n_threads)
    print("3/3 evaluating against persistence and ridge AR(10)", flush=True)
    from coursehub.pendulum import evaluate

    eval_args = argparse.Namespace(
        model_file=out / "model.pt",
        data=out / "pendulum.npz",
        json=out / "metrics.json",
        plot=out / "evaluation.png",
        arch=None,
        starts_per_trajectory=evaluate.DEFAULT_STARTS,
        threads=n_threads,
        device="cpu",
    )
    evaluate.run(eval_args)
    print(f"done: metrics in {out / 'metrics.json'}, plots in {out / 'evaluation.png'}")
    return 0
