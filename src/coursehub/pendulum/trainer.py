"""The training loop of the forecasters: batches, learning rate, epochs, checkpoints.

Torch is imported at module level: import this module only after the thread
count is set (:func:`coursehub.pendulum.train.apply_threads`).

Determinism: the windows of epoch ``e`` and the input noise are drawn from
generators seeded with ``(seed, e)``, and the learning rate is a function of
the global step, so a run resumed from the checkpoint of epoch ``e`` repeats
exactly what an uninterrupted run does (same seed, threads and device).

Checkpoint format (``torch.save`` of a plain dict, loadable with
``torch.load(weights_only=True)``): ``format``, ``format_version``,
``model_config``, ``train_config`` (dicts), ``model_state``,
``optimizer_state``, ``epoch`` (completed epochs), ``global_step``,
``rng`` (torch CPU generator state), ``scaler`` (lists of floats),
``history`` (per-epoch ``train_loss``, ``val_loss``, ``lr``, ``time_s``),
``data`` (file name, seed, sizes of the splits).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from coursehub.errors import UsageError
from coursehub.pendulum.model import Forecaster, ModelConfig, Scaler, rollout_loss

CHECKPOINT_FORMAT = "coursehub.pendulum.checkpoint"
CHECKPOINT_VERSION = 1
# Validation windows per epoch (a fixed, seeded subset of the validation split).
N_VAL_WINDOWS = 4096
# The "epoch" number whose generator draws the validation subset.
VAL_STREAM = 2**31 - 1
WARMUP_STEPS = 100
REQUIRED_KEYS = ("model_config", "train_config", "model_state", "scaler", "epoch", "history")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings.

    Attributes
    ----------
    n_epochs : int
        Epochs in the whole run (the learning-rate schedule spans them).
    batch_size : int
        Windows per optimiser step.
    lr : float
        Peak learning rate of Adam (see :func:`plan_lr`).
    seed : int
        Seeds the initial weights, the windows of each epoch and the noise.
    max_windows : int or None
        Windows drawn per epoch (without replacement); None = all.
    rollout_steps : int
        Closed-loop steps in the loss (1 = one-step prediction).
    noise : float
        Standard deviation of Gaussian noise added to the input windows, in
        units of the model's ``step_scale`` (0 = none).
    lr_decay : float
        Factor applied to the learning rate per epoch (1 = constant).
    """

    n_epochs: int = 10
    batch_size: int = 256
    lr: float = 2e-3
    seed: int = 0
    max_windows: int | None = None
    rollout_steps: int = 1
    noise: float = 0.0
    lr_decay: float = 1.0

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Rebuild a config saved with ``dataclasses.asdict``."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


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


@dataclass
class TrainState:
    """Everything that changes during training and goes into the checkpoint."""

    model: Forecaster
    optimizer: torch.optim.Optimizer
    epoch: int = 0
    global_step: int = 0
    history: dict[str, list[float]] | None = None

    def __post_init__(self) -> None:
        if self.history is None:
            self.history = {"train_loss": [], "val_loss": [], "lr": [], "time_s": []}


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
    assert state.history is not None
    state.history["train_loss"].append(train_loss)
    state.history["val_loss"].append(val_loss)
    state.history["lr"].append(float(state.optimizer.param_groups[0]["lr"]))
    state.history["time_s"].append(time_s)


def render_checkpoint(
    state: TrainState, train_config: TrainConfig, data: dict[str, Any]
) -> dict[str, Any]:
    """The checkpoint dict of ``state`` (plain numbers, strings, lists, dicts, tensors)."""
    model_state = {k: v.detach().cpu() for k, v in state.model.state_dict().items()}
    return {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "model_config": asdict(state.model.config),
        "train_config": asdict(train_config),
        "model_state": model_state,
        "optimizer_state": state.optimizer.state_dict(),
        "epoch": state.epoch,
        "global_step": state.global_step,
        "rng": {"torch": torch.get_rng_state()},
        "scaler": state.model.scaler().as_dict(),
        "history": state.history,
        "data": data,
    }


def save_checkpoint(checkpoint: dict[str, Any], path: Path) -> None:
    """Write ``checkpoint`` atomically: temp file in the same folder, fsync, ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def load_checkpoint(path: Path, expect_arch: str | None = None) -> dict[str, Any]:
    """Read and check a checkpoint written by :func:`save_checkpoint`.

    Parameters
    ----------
    path : Path
    expect_arch : str, optional
        Raise unless the checkpoint's architecture is this one.

    Raises
    ------
    UsageError
        If the file is missing, not a torch file, not a coursehub pendulum
        checkpoint, from a newer format, or of another architecture.
    """
    if not path.is_file():
        raise UsageError(f"checkpoint {path} not found")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for damaged files
        raise UsageError(
            f"checkpoint {path} is corrupt, truncated or not a coursehub checkpoint "
            f"({type(exc).__name__})"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise UsageError(f"{path} is not a coursehub pendulum checkpoint")
    if ckpt.get("format_version", 0) > CHECKPOINT_VERSION:
        raise UsageError(f"checkpoint {path} has a newer format than this coursehub reads")
    missing = [k for k in REQUIRED_KEYS if k not in ckpt]
    if missing or not isinstance(ckpt["model_config"], dict):
        raise UsageError(f"checkpoint {path} is incomplete: it lacks {', '.join(missing)}")
    arch = ckpt["model_config"].get("arch")
    if expect_arch is not None and arch != expect_arch:
        raise UsageError(
            f"checkpoint {path} holds a {arch!r} model, not {expect_arch!r}; "
            "choose the matching --arch or another MODEL_FILE"
        )
    return ckpt


def restore_state(ckpt: dict[str, Any], device: torch.device) -> TrainState:
    """Rebuild model, optimiser, counters and history from a checkpoint.

    Raises
    ------
    UsageError
        If the weights do not fit the stored configuration.
    """
    config = ModelConfig.from_dict(ckpt["model_config"])
    scaler = Scaler(**{k: tuple(v) for k, v in ckpt["scaler"].items()})
    model = Forecaster(config, scaler).to(device)
    try:
        model.load_state_dict(ckpt["model_state"])
    except RuntimeError as exc:
        raise UsageError(f"checkpoint weights do not match its model config: {exc}") from None
    optimizer = torch.optim.Adam(model.parameters())
    if "optimizer_state" in ckpt:
        optimizer.load_state_dict(ckpt["optimizer_state"])
    if "rng" in ckpt:
        torch.set_rng_state(ckpt["rng"]["torch"])
    history = {k: list(v) for k, v in ckpt.get("history", {}).items()} or None
    return TrainState(model, optimizer, ckpt.get("epoch", 0), ckpt.get("global_step", 0), history)


def load_model(path: Path, device: str = "cpu") -> Forecaster:
    """The trained forecaster of a checkpoint, in eval mode on ``device``."""
    state = restore_state(load_checkpoint(path), torch.device(device))
    return state.model.eval()


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``(fn(), seconds)``."""
    t0 = time.perf_counter()
    return fn(), time.perf_counter() - t0


def describe_data(
    path: Path, seed: int, sizes: Sequence[int], trajectories: int | None
) -> dict[str, Any]:
    """The ``data`` entry of a checkpoint (``trajectories``: the ``--trajectories`` limit)."""
    return {
        "path": str(path),
        "seed": int(seed),
        "n_train": sizes[0],
        "n_val": sizes[1],
        "trajectories": trajectories,
    }
