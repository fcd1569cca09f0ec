"""Train the double-pendulum forecaster with an explicit thread count: the command.

The course's interface, unchanged::

    python -m coursehub.pendulum.train MODEL_FILE N_EPOCHS N_THREADS
    coursehub pendulum train MODEL_FILE N_EPOCHS N_THREADS
    coursehub pendulum train MODEL_FILE --preset class   # its epochs and threads

This module is the command only: it parses the command line (only
:func:`main` and :func:`run` see argparse), turns it into typed settings
(:mod:`coursehub.pendulum.trainsettings`, from the presets of
:mod:`coursehub.pendulum.config`: every option left out takes the value of
the ``--arch`` preset, or of the run preset ``--preset`` names, such as
``class``, the minute of training of a class, :data:`coursehub.pendulum.config.RUN_PRESETS`;
:mod:`coursehub.pendulum.resume` for ``--resume``) and hands them to the
loop, :func:`coursehub.pendulum.fitting.fit`.

The thread variables (:func:`coursehub.resources.threads.thread_env`) are put into
this process's environment before torch is imported, and
``torch.set_num_threads`` runs before any torch work: a CPU quota is
invisible to torch, which would otherwise start one thread per host core
(PyTorch docs, "CPU threading and TorchScript inference"; OpenMP API
specification, ``OMP_NUM_THREADS``). This module therefore imports torch only inside
functions.

Policy for MODEL_FILE: the checkpoint is rewritten atomically after each
epoch. An existing MODEL_FILE is never overwritten unless ``--resume``
(continue it) or ``--force`` (start afresh; the old file stays until the
first epoch is complete) is given. On SIGINT or SIGTERM the current epoch is
abandoned, MODEL_FILE keeps the last completed epoch and the exit status is
130 or 143. Bad input exits with status 2 and one line, before anything is
written. A full disk or quota when a checkpoint is written stops the run with
status 2 and one line naming the epoch MODEL_FILE still holds (the atomic
write keeps the previous checkpoint whole and leaves no temporary file).

Resuming (``--resume``): the model and optimisation settings are the
checkpoint's. An option left out takes the checkpoint's value silently; an
option given with another value than the checkpoint's is refused (status 2,
one ``checkpoint has lr=0.002, --lr 0.01 given`` per difference), as is
another ``--arch``. The options of
:data:`coursehub.pendulum.trainsettings.RESUME_FIXED` are fixed so;
changeable on resume are only N_EPOCHS (the run's total), N_THREADS,
``--data`` (a file of the same dataset: same seed), ``--device`` and
``--no-progress`` (:data:`coursehub.pendulum.trainsettings.RESUME_CHANGEABLE`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coursehub.errors import (
    CoursehubError,
    StorageFullError,
    UsageError,
    is_storage_refused,
    storage_full_kind,
    storage_hint,
)
from coursehub.pendulum.config import ARCHS, DEFAULT_ARCH, PRESET_NAMES, RUN_PRESETS, run_preset
from coursehub.pendulum.datafile import load_dataset
from coursehub.pendulum.dataset import DEFAULT_DATA_PATH
from coursehub.pendulum.resume import prepare_resume
from coursehub.pendulum.trainsettings import (
    RESUME_FIXED,
    RESUME_HELP,
    TrainRequest,
    plan_configs,
    preset_options,
    render_preset_help,
)
from coursehub.resources.cpus import effective_cpus
from coursehub.resources.threads import thread_env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of ``coursehub pendulum train``; settings default to None.

    An option left out is filled from the ``--arch`` preset (fresh run) or
    from the checkpoint (``--resume``), never by argparse.
    """
    parser.add_argument("model_file", type=Path, metavar="MODEL_FILE", help="checkpoint to write")
    parser.add_argument(
        "n_epochs",
        type=int,
        nargs="?",
        metavar="N_EPOCHS",
        help="epochs in the whole run (with --preset: the preset's when left out)",
    )
    parser.add_argument(
        "n_threads",
        type=int,
        nargs="?",
        metavar="N_THREADS",
        help="torch/BLAS threads (with --preset: the preset's when left out)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA_PATH,
        metavar="FILE",
        help=f"dataset file (default: {DEFAULT_DATA_PATH})",
    )
    parser.add_argument(
        "--arch",
        choices=ARCHS,
        default=None,
        help=f"lstm (sin/cos features, increments; default: {DEFAULT_ARCH}) or course "
        "(the course's LSTM(4->100) on MinMax-scaled raw states, batch 1)",
    )
    parser.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default=None,
        help="a named run whose settings fill every option left out; "
        + "; ".join(preset.describe() for preset in RUN_PRESETS.values())
        + " (N_EPOCHS and N_THREADS default to its epochs and threads; a larger N_EPOCHS "
        "trains longer, --resume continues a finished run)",
    )
    add_setting_arguments(parser)


def add_setting_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the model and run settings of ``coursehub pendulum train`` (default None:
    filled from the preset or the checkpoint) and the switches (``--device``, ``--resume``...)."""
    for option, kind in (
        ("hidden_size", int),
        ("layers", int),
        ("batch_size", int),
        ("lr", float),
        ("rollout_steps", int),
        ("noise", float),
        ("lr_decay", float),
    ):
        flag = "--" + option.replace("_", "-")
        parser.add_argument(flag, type=kind, default=None, help=render_preset_help(option))
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"weights, batches, noise ({render_preset_help('seed')})",
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
        help="use only the first N training trajectories (default: all)",
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


def plan_request(args: argparse.Namespace) -> TrainRequest:
    """The typed request of parsed arguments (options left out are None there)."""
    given = {k: getattr(args, k) for k in RESUME_FIXED if getattr(args, k, None) is not None}
    n_epochs, n_threads = args.n_epochs, args.n_threads
    preset_name = getattr(args, "preset", None)
    if preset_name is not None:
        given = preset_options(preset_name, given)
        preset = run_preset(preset_name)
        n_epochs = preset.train.n_epochs if n_epochs is None else n_epochs
        n_threads = preset.n_threads if n_threads is None else n_threads
    if n_epochs is None or n_threads is None:
        missing = " and ".join(
            name for name, v in (("N_EPOCHS", n_epochs), ("N_THREADS", n_threads)) if v is None
        )
        raise UsageError(f"{missing}: required unless --preset gives them (e.g. --preset class)")
    return TrainRequest(
        model_file=args.model_file,
        n_epochs=n_epochs,
        n_threads=n_threads,
        data=args.data,
        device=args.device,
        resume=args.resume,
        force=args.force,
        progress=not args.no_progress,
        given=given,
    )


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


def describe_checkpoint_full(path: Path, epoch: int, held: int, exc: OSError) -> str:
    """Return the one line of a checkpoint the storage refused: full, quota, read-only (pure).

    ``epoch``: the one not written; ``held``: the one ``path`` still holds
    (0: none written by this run).
    """
    hint = storage_hint(exc)
    kept = (
        f"{path} still holds epoch {held}: {hint}, then continue with --resume"
        if held
        else f"no checkpoint of this run written, {path} unchanged: {hint} and start again"
    )
    return f"{storage_full_kind(exc)}: checkpoint of epoch {epoch} not written; {kept}"


def train(request: TrainRequest) -> int:
    """Check the input, set threads, train epoch by epoch, checkpoint; return the exit status."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    warning = check_counts(request.n_epochs, request.n_threads)
    if warning:
        print(warning, file=sys.stderr)
    if not request.resume:  # settings checked before torch loads and anything is written
        fresh = plan_configs(request.n_epochs, request.given or {})
    ds = load_dataset(request.data)
    check_model_file(request.model_file, request.resume, request.force)
    apply_threads(request.n_threads)  # before anything imports torch
    from coursehub.pendulum.checkpoint import render_checkpoint, save_checkpoint
    from coursehub.pendulum.fitting import TrainData, fit

    device = pick_device(request.device)
    if request.resume:
        model_config, train_config, trajectories, start = prepare_resume(request, ds.seed, device)
    else:
        (model_config, train_config, trajectories), start = fresh, None
    data = TrainData.from_dataset(ds, request.data, trajectories)

    held = [start.epoch if start is not None else 0]  # the epoch MODEL_FILE holds

    def save(state: Any) -> None:
        checkpoint = render_checkpoint(state, train_config, data.describe())
        try:
            save_checkpoint(checkpoint, request.model_file)
        except OSError as exc:
            if not is_storage_refused(exc):
                raise
            message = describe_checkpoint_full(request.model_file, state.epoch, held[0], exc)
            raise StorageFullError(message) from None
        held[0] = state.epoch

    print(f"checkpoint after each epoch -> {request.model_file}", flush=True)
    stop = StopFlag()
    previous = stop.install()
    try:
        state = fit(
            model_config,
            train_config,
            data,
            device=device,
            start=start,
            stop=stop,
            progress=request.progress,
            on_epoch=save,
            log=lambda line: print(line, flush=True),
        )
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return report(request, state, stop, time.perf_counter() - t0, cpu0, str(device))


def report(
    request: TrainRequest, state: Any, stop: StopFlag, elapsed_s: float, cpu0: float, device: str
) -> int:
    """Print the run's figures (and why it stopped); return the exit status."""
    cpu_s = time.process_time() - cpu0
    rate = state.n_windows / state.elapsed_s if state.elapsed_s > 0 else 0.0
    print(
        f"elapsed {elapsed_s:.1f} s, cpu {cpu_s:.1f} s, threads {request.n_threads}, "
        f"{rate:.0f} samples/s, device {device}",
        flush=True,
    )
    if stop.signum is None:
        return 0
    name = signal.Signals(stop.signum).name
    held = (
        f"{request.model_file} holds epoch {state.epoch}; continue with --resume"
        if state.epoch
        else "no epoch completed, no checkpoint written"
    )
    print(f"coursehub: training stopped by {name}; {held}", file=sys.stderr, flush=True)
    return 128 + stop.signum


def run(args: argparse.Namespace) -> int:
    """``coursehub pendulum train``: the parsed arguments, typed, then :func:`train`."""
    return train(plan_request(args))


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
