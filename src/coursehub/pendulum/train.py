"""Train the double-pendulum forecaster with an explicit thread count.

The course's interface, unchanged::

    python -m coursehub.pendulum.train MODEL_FILE N_EPOCHS N_THREADS
    coursehub pendulum train MODEL_FILE N_EPOCHS N_THREADS

The thread variables (:func:`coursehub.resources.thread_env`) are put into
this process's environment before torch is imported, and
``torch.set_num_threads`` runs before any torch work: a CPU quota is
invisible to torch, which would otherwise start one thread per host core
(REFERENCE.md section 1). This module therefore imports torch only inside
functions.

Policy for MODEL_FILE: the checkpoint is rewritten atomically after each
epoch. An existing MODEL_FILE is never overwritten unless ``--resume``
(continue it) or ``--force`` (start afresh; the old file stays until the
first epoch is complete) is given. On SIGINT or SIGTERM the current epoch is
abandoned, MODEL_FILE keeps the last completed epoch and the exit status is
130 or 143. Bad input exits with status 2 and one line, before anything is
written.

Resuming (``--resume``): the model and optimisation settings are the
checkpoint's. An option left out takes the checkpoint's value silently; an
option given with another value than the checkpoint's is refused (status 2,
one ``checkpoint has lr=0.002, --lr 0.01 given`` per difference), as is
another ``--arch``. The options of :data:`RESUME_FIXED` are fixed so;
changeable on resume are only N_EPOCHS (the run's total), N_THREADS,
``--data`` (a file of the same dataset: same seed), ``--device`` and
``--no-progress`` (:data:`RESUME_CHANGEABLE`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from coursehub.errors import CoursehubError, UsageError
from coursehub.pendulum.dataset import DEFAULT_DATA_PATH, PendulumDataset, load_dataset
from coursehub.resources import effective_cpus, thread_env

# arch -> default of each model and optimisation setting (overridden by the options)
ARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    "lstm": {
        "hidden_size": 128,
        "n_layers": 2,
        "batch_size": 256,
        "lr": 2e-3,
        "rollout_steps": 1,
        "noise": 0.1,
        "lr_decay": 0.7,
    },
    "course": {
        "hidden_size": 100,
        "n_layers": 1,
        "batch_size": 1,
        "lr": 5e-4,
        "rollout_steps": 1,
        "noise": 0.0,
        "lr_decay": 1.0,
    },
}

#: Options fixed by the checkpoint on ``--resume``: option -> (checkpoint section, key).
#: Giving one with another value than the checkpoint's is refused.
RESUME_FIXED: dict[str, tuple[str, str]] = {
    "arch": ("model_config", "arch"),
    "hidden_size": ("model_config", "hidden_size"),
    "layers": ("model_config", "n_layers"),
    "batch_size": ("train_config", "batch_size"),
    "lr": ("train_config", "lr"),
    "rollout_steps": ("train_config", "rollout_steps"),
    "noise": ("train_config", "noise"),
    "lr_decay": ("train_config", "lr_decay"),
    "seed": ("train_config", "seed"),
    "max_windows": ("train_config", "max_windows"),
    "trajectories": ("data", "trajectories"),
}
#: What may change on ``--resume`` (the rest of the command line is :data:`RESUME_FIXED`).
RESUME_CHANGEABLE = ("N_EPOCHS", "N_THREADS", "--data", "--device", "--no-progress")
RESUME_HELP = (
    "continue MODEL_FILE with its own settings: options left out take the checkpoint's "
    "values; giving one with another value is refused, except N_EPOCHS, N_THREADS, "
    "--data (same dataset), --device and --no-progress"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``coursehub pendulum train``."""
    parser.add_argument("model_file", type=Path, metavar="MODEL_FILE", help="checkpoint to write")
    parser.add_argument("n_epochs", type=int, metavar="N_EPOCHS", help="epochs in the whole run")
    parser.add_argument("n_threads", type=int, metavar="N_THREADS", help="torch/BLAS threads")
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA_PATH,
        metavar="FILE",
        help=f"dataset file (default: {DEFAULT_DATA_PATH})",
    )
    parser.add_argument(
        "--arch",
        choices=tuple(ARCH_DEFAULTS),
        default=None,
        help="lstm (sin/cos features, increments; default) or course "
        "(the course's LSTM(4->100) on MinMax-scaled raw states, batch 1)",
    )
    for name, kind in (
        ("hidden-size", int),
        ("layers", int),
        ("batch-size", int),
        ("lr", float),
        ("rollout-steps", int),
        ("noise", float),
        ("lr-decay", float),
    ):
        parser.add_argument(f"--{name}", type=kind, default=None, help="default: per --arch")
    parser.add_argument(
        "--seed", type=int, default=None, help="weights, batches, noise (default: 0)"
    )
    parser.add_argument(
        "--max-windows",
        type=int,
        default=None,
        metavar="N",
        help="training windows drawn per epoch (default: all)",
    )
    parser.add_argument(
        "--trajectories",
        type=int,
        default=None,
        metavar="N",
        help="use only the first N training trajectories",
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: CUDA when available (default)",
    )
    parser.add_argument("--resume", action="store_true", help=RESUME_HELP)
    parser.add_argument("--force", action="store_true", help="replace an existing MODEL_FILE")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def plan_configs(args: argparse.Namespace) -> tuple[Any, Any]:
    """The (ModelConfig, TrainConfig) asked for by the arguments (fresh run).

    Raises
    ------
    UsageError
        If a setting is out of range.
    """
    from coursehub.pendulum.model import ModelConfig
    from coursehub.pendulum.trainer import TrainConfig

    arch = args.arch or "lstm"
    d = {
        k: v if getattr(args, k, None) is None else getattr(args, k)
        for k, v in ARCH_DEFAULTS[arch].items()
    }
    if args.layers is not None:
        d["n_layers"] = args.layers
    base = ModelConfig.course() if arch == "course" else ModelConfig()
    model_config = replace(base, hidden_size=d["hidden_size"], n_layers=d["n_layers"])
    for name in ("batch_size", "rollout_steps"):
        if d[name] < 1:
            raise UsageError(f"--{name.replace('_', '-')}={d[name]} must be >= 1")
    if not (d["lr"] > 0 and d["noise"] >= 0 and 0 < d["lr_decay"] <= 1):
        raise UsageError("--lr must be > 0, --noise >= 0 and --lr-decay in (0, 1]")
    seed = 0 if args.seed is None else args.seed
    if seed < 0:
        raise UsageError(f"--seed={seed} must be >= 0")
    if args.trajectories is not None and args.trajectories < 1:
        raise UsageError(f"--trajectories={args.trajectories} must be >= 1")
    if args.max_windows is not None and args.max_windows < 1:
        raise UsageError(f"--max-windows={args.max_windows} must be >= 1")
    train_config = TrainConfig(
        n_epochs=args.n_epochs,
        batch_size=d["batch_size"],
        lr=d["lr"],
        seed=seed,
        max_windows=args.max_windows,
        rollout_steps=d["rollout_steps"],
        noise=d["noise"],
        lr_decay=d["lr_decay"],
    )
    return model_config, train_config


def plan_resume_conflicts(args: argparse.Namespace, ckpt: dict[str, Any]) -> list[str]:
    """The options given explicitly with another value than the checkpoint's, one line each.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments; an option left out is None there.
    ckpt : dict
        A checkpoint (:func:`coursehub.pendulum.trainer.load_checkpoint`), with
        its ``model_config``, ``train_config`` and ``data`` sections.

    Returns
    -------
    list of str
        ``checkpoint has lr=0.002, --lr 0.01 given`` for each option of
        :data:`RESUME_FIXED` that differs, in that table's order; empty when
        none does.
    """
    conflicts = []
    for option, (section, key) in RESUME_FIXED.items():
        given = getattr(args, option, None)
        if given is None:
            continue
        held = (ckpt.get(section) or {}).get(key)
        if not _same_setting(held, given):
            flag = "--" + option.replace("_", "-")
            shown = "all" if held is None else held  # max_windows, trajectories
            conflicts.append(f"checkpoint has {key}={shown}, {flag} {given} given")
    return conflicts


def _same_setting(held: Any, given: Any) -> bool:
    """Equal settings; floats to 1e-12 relative (``2e-3`` and ``0.002`` are one value)."""
    if isinstance(held, float) or isinstance(given, float):
        if held is None or isinstance(held, str) or isinstance(given, str):
            return False
        return math.isclose(float(held), float(given), rel_tol=1e-12, abs_tol=0.0)
    return bool(held == given)


def check_counts(n_epochs: int, n_threads: int) -> str | None:
    """Raise on a non-positive count; return a warning when threads exceed the usable CPUs."""
    if n_epochs <= 0:
        raise UsageError(f"N_EPOCHS={n_epochs} is out of range: it must be >= 1")
    if n_threads <= 0:
        raise UsageError(f"N_THREADS={n_threads} is out of range: it must be >= 1")
    cpus = effective_cpus()
    if n_threads > cpus:
        return (
            f"coursehub: warning: N_THREADS={n_threads} exceeds the {cpus:g} CPUs this "
            "process may use; threads will compete for them"
        )
    return None


def apply_threads(n_threads: int) -> None:
    """Put the thread variables into ``os.environ``, then import torch and fix its pools.

    Must run before torch is first imported in this process for the
    environment to matter; ``torch.set_num_threads`` applies in any case.
    """
    os.environ.update(thread_env(n_threads))
    import torch

    torch.set_num_threads(n_threads)
    # RuntimeError: already set, or parallel work has started in this process.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(min(2, n_threads))


def pick_device(name: str) -> Any:
    """``torch.device`` for ``auto`` / ``cpu`` / ``cuda``; UsageError if CUDA is missing."""
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda asked for, but torch sees no CUDA device")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def split_states(ds: PendulumDataset, name: str, limit: int | None = None) -> Any:
    """States (n, n_samples, 4) of a split, optionally only its first ``limit`` trajectories."""
    idx = ds.indices(name)[:limit]
    if len(idx) == 0:
        raise UsageError(f"the dataset has no {name} trajectories; generate more trajectories")
    return ds.states[idx]


def check_model_file(path: Path, resume: bool, force: bool) -> None:
    """Apply the MODEL_FILE policy (module docstring) before anything is written."""
    if resume and not path.is_file():
        raise UsageError(f"--resume: checkpoint {path} not found")
    if path.exists() and not resume and not force:
        raise UsageError(
            f"{path} already exists; pass --resume to continue it or --force to replace it"
        )
    if path.is_dir():
        raise UsageError(f"MODEL_FILE {path} is a directory")


class StopFlag:
    """Set by SIGINT/SIGTERM; the training loop checks it between batches."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self) -> bool:
        return self.signum is not None

    def handle(self, signum: int, _frame: Any) -> None:
        self.signum = signum

    def install(self) -> dict[int, Any]:
        """Install the handler for SIGINT and SIGTERM; return the previous handlers."""
        return {s: signal.signal(s, self.handle) for s in (signal.SIGINT, signal.SIGTERM)}


def prepare(args: argparse.Namespace, ds: PendulumDataset, device: Any) -> tuple[Any, Any]:
    """(TrainState, TrainConfig): restored from MODEL_FILE with --resume, else fresh."""
    from coursehub.pendulum.model import fit_scaler
    from coursehub.pendulum.trainer import (
        TrainConfig,
        build_state,
        load_checkpoint,
        restore_state,
    )

    if args.resume:
        ckpt = load_checkpoint(args.model_file, expect_arch=args.arch)
        conflicts = plan_resume_conflicts(args, ckpt)
        if conflicts:
            raise UsageError(
                f"--resume {args.model_file}: " + "; ".join(conflicts) + "; leave those "
                "options out to continue with the checkpoint's settings, or start a new "
                "MODEL_FILE (--force replaces it)"
            )
        if ckpt["data"].get("seed") != ds.seed:
            raise UsageError(
                f"checkpoint {args.model_file} was trained on another dataset "
                f"(seed {ckpt['data'].get('seed')}, not {ds.seed})"
            )
        cfg = replace(TrainConfig.from_dict(ckpt["train_config"]), n_epochs=args.n_epochs)
        args.trajectories = ckpt["data"].get("trajectories")
        return restore_state(ckpt, device), cfg
    model_config, cfg = plan_configs(args)
    scaler = fit_scaler(model_config, split_states(ds, "train", args.trajectories))
    return build_state(model_config, scaler, cfg, device), cfg


def run(args: argparse.Namespace) -> int:
    """Check the input, set threads, train epoch by epoch, checkpoint; return the exit status."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    warning = check_counts(args.n_epochs, args.n_threads)
    if warning:
        print(warning, file=sys.stderr)
    ds = load_dataset(args.data)
    check_model_file(args.model_file, args.resume, args.force)
    apply_threads(args.n_threads)  # before anything imports torch
    device = pick_device(args.device)
    state, cfg = prepare(args, ds, device)
    stop = StopFlag()
    previous = stop.install()
    try:
        n_samples, train_s = fit(args, ds, state, cfg, stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    elapsed_s = time.perf_counter() - t0
    return report(args, state, stop, (n_samples, train_s), elapsed_s, cpu0, str(device))


def fit(
    args: argparse.Namespace, ds: PendulumDataset, state: Any, cfg: Any, stop: StopFlag
) -> tuple[int, float]:
    """Train until ``cfg.n_epochs`` or a stop signal; return (windows trained on, seconds)."""
    from tqdm.auto import tqdm

    from coursehub.pendulum import trainer
    from coursehub.pendulum.model import count_parameters

    span = state.model.config.window + cfg.rollout_steps
    train_src = trainer.WindowSource(
        split_states(ds, "train", args.trajectories), span, state.model.step_scale.device
    )
    val_src = trainer.WindowSource(split_states(ds, "val"), span, state.model.step_scale.device)
    data = trainer.describe_data(
        args.data, ds.seed, [len(ds.indices("train")), len(ds.indices("val"))], args.trajectories
    )
    n_samples, train_s = 0, 0.0
    per_epoch = min(train_src.n_windows, cfg.max_windows or train_src.n_windows)
    mc = state.model.config
    print(
        f"{mc.arch} model, {mc.n_layers} x {mc.hidden_size} hidden, "
        f"{count_parameters(state.model):,} parameters; {per_epoch:,} of "
        f"{train_src.n_windows:,} training windows per epoch, batch {cfg.batch_size}",
        flush=True,
    )
    while state.epoch < cfg.n_epochs and not stop():
        desc = f"epoch {state.epoch + 1}/{cfg.n_epochs}"
        with tqdm(
            total=per_epoch,
            desc=desc,
            unit="win",
            unit_scale=True,
            disable=args.no_progress,
            mininterval=1.0,
        ) as bar:

            def progress(n: int, loss: float, bar: Any = bar) -> None:
                bar.update(n)
                bar.set_postfix(loss=f"{loss:.3g}", refresh=False)

            loss, time_s = trainer.timed(
                lambda: trainer.train_epoch(state, train_src, cfg, stop, progress)
            )
        if loss is None:
            break
        n_samples += per_epoch
        train_s += time_s
        val_loss = trainer.validate(state, val_src, cfg)
        trainer.record_epoch(state, loss, val_loss, time_s)
        trainer.save_checkpoint(trainer.render_checkpoint(state, cfg, data), args.model_file)
        print(
            f"epoch {state.epoch}/{cfg.n_epochs}: train loss {loss:.4g}, val loss "
            f"{val_loss:.4g}, {time_s:.1f} s -> {args.model_file}",
            flush=True,
        )
    return n_samples, train_s


def report(
    args: argparse.Namespace,
    state: Any,
    stop: StopFlag,
    trained: tuple[int, float],
    elapsed_s: float,
    cpu0: float,
    device: str,
) -> int:
    """Print the run's figures (and why it stopped); return the exit status."""
    cpu_s = time.process_time() - cpu0
    rate = trained[0] / trained[1] if trained[1] > 0 else 0.0
    print(
        f"elapsed {elapsed_s:.1f} s, cpu {cpu_s:.1f} s, threads {args.n_threads}, "
        f"{rate:.0f} samples/s, device {device}",
        flush=True,
    )
    if stop.signum is None:
        return 0
    name = signal.Signals(stop.signum).name
    held = (
        f"{args.model_file} holds epoch {state.epoch}; continue with --resume"
        if state.epoch
        else "no epoch completed, no checkpoint written"
    )
    print(f"coursehub: training stopped by {name}; {held}", file=sys.stderr, flush=True)
    return 128 + stop.signum


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m coursehub.pendulum.train``: parse, run, print user errors as one line."""
    parser = argparse.ArgumentParser(
        prog="python -m coursehub.pendulum.train", description=__doc__.split("\n")[0]
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except CoursehubError as exc:
        print(f"coursehub: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("coursehub: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
