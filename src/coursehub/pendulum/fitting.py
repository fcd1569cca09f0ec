"""The training loop of the forecasters: batches, learning rate, epochs.

:func:`fit` takes typed settings (:class:`~coursehub.pendulum.config.ModelConfig`,
:class:`~coursehub.pendulum.config.TrainConfig`, :class:`TrainData`) and
returns a :class:`TrainState`; it never sees a command line. The command is
:mod:`coursehub.pendulum.train`; the checkpoint format is
:mod:`coursehub.pendulum.checkpoint`.

Torch is imported at module level: import this module only after the thread
count is set (:func:`coursehub.pendulum.train.apply_threads`).

Determinism: the windows of epoch ``e`` and the input noise are drawn from
generators seeded with ``(seed, e)``, and the learning rate is a function of
the global step, so a run resumed from the checkpoint of epoch ``e`` repeats
exactly what an uninterrupted run does (same seed, threads and device).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from coursehub.errors import UsageError
from coursehub.pendulum.config import ModelConfig, TrainConfig
from coursehub.pendulum.datafile import PendulumDataset
from coursehub.pendulum.model import Forecaster, Scaler, count_parameters, fit_scaler, rollout_loss

# Validation windows per epoch (a fixed, seeded subset of the validation split).
N_VAL_WINDOWS = 4096
# The "epoch" number whose generator draws the validation subset.
VAL_STREAM = 2**31 - 1
WARMUP_STEPS = 100


def plan_epoch(
    n_windows: int, max_windows: int | None, batch_size: int, seed: int, epoch: int
) -> list[NDArray[np.int64]]:
    """Window indices of each batch of one epoch, a pure function of ``(seed, epoch)``.

    Returns
    -------
    list of ndarray
        Batches of at most ``batch_size`` indices into ``range(n_windows)``,
        ``min(n_windows, max_windows)`` indices in all, without repetition.
    """
    order = np.random.default_rng([seed, epoch]).permutation(n_windows)
    if max_windows is not None:
        order = order[:max_windows]
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def plan_lr(step: int, steps_per_epoch: int, cfg: TrainConfig) -> float:
    """Learning rate at optimiser step ``step`` (0-based, counted over the whole run).

    Linear warm-up over the first ``WARMUP_STEPS`` steps, then exponential
    decay by ``cfg.lr_decay`` per epoch. It does not depend on
    ``cfg.n_epochs``, so training 2 epochs and resuming to 5 follows the
    same schedule as training 5 at once.
    """
    warm = min(1.0, (step + 1) / WARMUP_STEPS)
    return cfg.lr * warm * cfg.lr_decay ** (step / max(1, steps_per_epoch))


@dataclass(frozen=True)
class TrainData:
    """The trajectories a run trains and validates on, and where they come from.

    Attributes
    ----------
    train, val : ndarray, shape (n, n_samples, 4)
        States (rad, rad/s) of the training trajectories used (the first
        ``trajectories`` of the split when limited) and of the validation split.
    path : Path
        The dataset file.
    seed : int
        The dataset's seed: a run resumes only on a file of the same seed.
    n_train, n_val : int
        Sizes of the file's training and validation splits.
    trajectories : int or None
        The limit on training trajectories (``--trajectories``); None = all.
    """

    train: NDArray[np.float64]
    val: NDArray[np.float64]
    path: Path
    seed: int
    n_train: int
    n_val: int
    trajectories: int | None = None

    @classmethod
    def from_dataset(
        cls, ds: PendulumDataset, path: Path, trajectories: int | None = None
    ) -> TrainData:
        """Select the splits of ``ds``.

        Raises
        ------
        UsageError
            If ``trajectories`` < 1 or a split has no trajectory.
        """
        if trajectories is not None and trajectories < 1:
            raise UsageError(f"--trajectories={trajectories} must be >= 1")
        splits = {}
        for name, limit in (("train", trajectories), ("val", None)):
            idx = ds.indices(name)[:limit]
            if len(idx) == 0:
                raise UsageError(
                    f"the dataset has no {name} trajectories; generate more trajectories"
                )
            splits[name] = ds.states[idx]
        n_train, n_val = len(ds.indices("train")), len(ds.indices("val"))
        return cls(splits["train"], splits["val"], path, int(ds.seed), n_train, n_val, trajectories)

    def describe(self) -> dict[str, Any]:
        """The ``data`` entry of a checkpoint (:mod:`coursehub.pendulum.checkpoint`)."""
        return {
            "path": str(self.path),
            "seed": self.seed,
            "n_train": self.n_train,
            "n_val": self.n_val,
            "trajectories": self.trajectories,
        }


class WindowSource:
    """All (trajectory, start) windows of some trajectories, gathered on demand.

    Parameters
    ----------
    states : ndarray, shape (n_traj, n_samples, 4)
    span : int
        Samples per window: the model's window plus the rollout steps.
    device : torch.device
    """

    def __init__(self, states: NDArray[np.float64], span: int, device: torch.device) -> None:
        n_traj, n_samples, _ = states.shape
        n_per = n_samples - span + 1
        if n_traj == 0 or n_per < 1:
            raise UsageError(
                f"need trajectories of at least {span} samples, got {n_traj} x {n_samples}"
            )
        self.states = torch.as_tensor(states, dtype=torch.float32, device=device)
        self.n_per = n_per
        self.n_windows = n_traj * n_per
        self.offsets = torch.arange(span, device=device)

    def gather(self, index: NDArray[np.int64]) -> torch.Tensor:
        """Windows (B, span, 4) for window indices (B,) (trajectory-major order)."""
        idx = torch.as_tensor(index, device=self.states.device)
        traj, start = idx // self.n_per, idx % self.n_per
        return self.states[traj[:, None], start[:, None] + self.offsets]


def _empty_history() -> dict[str, list[float]]:
    return {"train_loss": [], "val_loss": [], "lr": [], "time_s": []}


@dataclass
class TrainState:
    """Where a training stands.

    Attributes
    ----------
    model, optimizer
        The forecaster and its Adam optimiser.
    epoch : int
        Completed epochs (over the whole run, resumes included).
    global_step : int
        Optimiser steps so far (over the whole run).
    history : dict of lists
        Per completed epoch: ``train_loss``, ``val_loss`` (mean square error in
        ``step_scale`` units), ``lr`` and ``time_s``.
    n_windows, elapsed_s : int, float
        Windows trained on and seconds spent in training epochs *by this
        process* (not checkpointed: the figures of this run).
    """

    model: Forecaster
    optimizer: torch.optim.Optimizer
    epoch: int = 0
    global_step: int = 0
    history: dict[str, list[float]] = field(default_factory=_empty_history)
    n_windows: int = 0
    elapsed_s: float = 0.0

    @property
    def best_val_loss(self) -> float | None:
        """The lowest validation loss over the completed epochs; None before the first."""
        return min(self.history["val_loss"], default=None)


def build_state(
    model_config: ModelConfig, scaler: Scaler, train_config: TrainConfig, device: torch.device
) -> TrainState:
    """A freshly initialised model (seeded by ``train_config.seed``) and its Adam optimiser."""
    torch.manual_seed(train_config.seed)
    model = Forecaster(model_config, scaler).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=train_config.lr)
    return TrainState(model, optimizer)


def train_epoch(
    state: TrainState,
    source: WindowSource,
    cfg: TrainConfig,
    stop: Callable[[], bool],
    progress: Callable[[int, float], None] | None = None,
) -> float | None:
    """Run one epoch; return the mean training loss, or None if ``stop()`` became true.

    The epoch number is ``state.epoch`` (0-based); on success it is incremented.
    """
    window = state.model.config.window
    batches = plan_epoch(source.n_windows, cfg.max_windows, cfg.batch_size, cfg.seed, state.epoch)
    gen = torch.Generator(device=source.states.device).manual_seed(cfg.seed * 100_003 + state.epoch)
    state.model.train()
    losses = []
    for index in batches:
        if stop():
            return None
        lr = plan_lr(state.global_step, len(batches), cfg)
        for group in state.optimizer.param_groups:
            group["lr"] = lr
        batch = source.gather(index)
        context = batch[:, :window]
        if cfg.noise > 0:
            noise = torch.randn(context.shape, generator=gen, device=context.device)
            context = context + noise * (cfg.noise * state.model.step_scale)
        loss = rollout_loss(state.model, context, batch[:, window:])
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        state.optimizer.step()
        state.global_step += 1
        losses.append(loss.item())
        if progress is not None:
            progress(len(index), losses[-1])
    state.epoch += 1
    return float(np.mean(losses))


@torch.no_grad()
def validate(state: TrainState, source: WindowSource, cfg: TrainConfig) -> float:
    """Mean loss on a fixed, seeded subset of the validation windows (no noise)."""
    state.model.eval()
    window = state.model.config.window
    batches = plan_epoch(source.n_windows, N_VAL_WINDOWS, 1024, cfg.seed, VAL_STREAM)
    losses = [
        float(rollout_loss(state.model, b[:, :window], b[:, window:])) * len(i)
        for i in batches
        for b in [source.gather(i)]
    ]
    state.model.train()
    return sum(losses) / sum(len(i) for i in batches)


def record_epoch(state: TrainState, train_loss: float, val_loss: float, time_s: float) -> None:
    """Append one epoch's figures to the history."""
    state.history["train_loss"].append(train_loss)
    state.history["val_loss"].append(val_loss)
    state.history["lr"].append(float(state.optimizer.param_groups[0]["lr"]))
    state.history["time_s"].append(time_s)


def fit(
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    data: TrainData,
    *,
    device: torch.device | str = "cpu",
    start: TrainState | None = None,
    stop: Callable[[], bool] = lambda: False,
    progress: bool = False,
    on_epoch: Callable[[TrainState], None] | None = None,
    log: Callable[[str], None] = print,
) -> TrainState:
    """Train until ``train_cfg.n_epochs`` epochs are complete or ``stop()`` becomes true.

    Parameters
    ----------
    model_cfg, train_cfg : ModelConfig, TrainConfig
        The settings (:mod:`coursehub.pendulum.config`).
    data : TrainData
        Training and validation trajectories; the scalers are fitted on
        ``data.train`` for a fresh model.
    device : torch.device or str
        Where a fresh model is built (a ``start`` state stays where it is).
    start : TrainState, optional
        Continue this state (restored from a checkpoint) instead of building
        a fresh model; its model must have ``model_cfg``.
    stop : callable
        Checked between batches; the epoch in progress is then abandoned.
    progress : bool
        Show a tqdm progress bar per epoch.
    on_epoch : callable, optional
        Called with the state after each completed epoch (the command
        writes its checkpoint there).
    log : callable
        Receives one line per epoch and a description of the model.

    Returns
    -------
    TrainState
        The state after the last completed epoch.

    Raises
    ------
    UsageError
        If ``start`` holds another model configuration, or the trajectories
        are shorter than one window.
    """
    from tqdm.auto import tqdm

    if start is None:
        scaler = fit_scaler(model_cfg, data.train)
        state = build_state(model_cfg, scaler, train_cfg, torch.device(device))
    elif start.model.config != model_cfg:
        raise UsageError(f"the state to continue has {start.model.config}, not {model_cfg}")
    else:
        state = start
    where = state.model.step_scale.device
    span = model_cfg.window + train_cfg.rollout_steps
    train_src = WindowSource(data.train, span, where)
    val_src = WindowSource(data.val, span, where)
    per_epoch = min(train_src.n_windows, train_cfg.max_windows or train_src.n_windows)
    log(
        f"{model_cfg.arch} model, {model_cfg.n_layers} x {model_cfg.hidden_size} hidden, "
        f"{count_parameters(state.model):,} parameters; {per_epoch:,} of "
        f"{train_src.n_windows:,} training windows per epoch, batch {train_cfg.batch_size}"
    )
    while state.epoch < train_cfg.n_epochs and not stop():
        desc = f"epoch {state.epoch + 1}/{train_cfg.n_epochs}"
        opts = {"unit": "win", "unit_scale": True, "disable": not progress, "mininterval": 1.0}
        with tqdm(total=per_epoch, desc=desc, **opts) as bar:

            def advance(n: int, loss: float, bar: Any = bar) -> None:
                bar.update(n)
                bar.set_postfix(loss=f"{loss:.3g}", refresh=False)

            t0 = time.perf_counter()
            loss = train_epoch(state, train_src, train_cfg, stop, advance)
            time_s = time.perf_counter() - t0
        if loss is None:
            break
        state.n_windows += per_epoch
        state.elapsed_s += time_s
        val_loss = validate(state, val_src, train_cfg)
        record_epoch(state, loss, val_loss, time_s)
        if on_epoch is not None:
            on_epoch(state)
        log(
            f"epoch {state.epoch}/{train_cfg.n_epochs}: train loss {loss:.4g}, "
            f"val loss {val_loss:.4g}, {time_s:.1f} s"
        )
    return state
