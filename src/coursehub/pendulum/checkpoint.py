"""The checkpoint of a forecaster: its one format, written atomically, read back checked.

Format (``torch.save`` of a plain dict, loadable with
``torch.load(weights_only=True)``, the default since torch 2.6: PyTorch
docs, ``torch.load``): ``format``, ``format_version``, ``model_config``
and ``train_config`` (``dataclasses.asdict`` of
:mod:`coursehub.pendulum.config`'s dataclasses), ``model_state`` (scalers
included, as buffers), ``optimizer_state``, ``epoch`` (completed epochs),
``global_step``, ``rng`` (torch CPU generator state), ``scaler`` (lists of
floats), ``history`` (per-epoch ``train_loss``, ``val_loss``, ``lr``,
``time_s``), ``data`` (:meth:`coursehub.pendulum.fitting.TrainData.describe`:
file name, seed, sizes of the splits, trajectory limit).

Version 1 is the only one written so far; every version-1 file loads and
resumes (``tests/fixtures/pendulum-checkpoint-v1-*.pt``).
"""

from __future__ import annotations

import io
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from coursehub.atomicfile import write_atomically
from coursehub.errors import UsageError
from coursehub.pendulum.config import ModelConfig, TrainConfig
from coursehub.pendulum.fitting import TrainState
from coursehub.pendulum.model import Forecaster, Scaler

CHECKPOINT_FORMAT = "coursehub.pendulum.checkpoint"
CHECKPOINT_VERSION = 1
REQUIRED_KEYS = ("model_config", "train_config", "model_state", "scaler", "epoch", "history")


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
    """Write ``checkpoint`` atomically (:func:`coursehub.atomicfile.write_atomically`).

    The file gets the mode ``open()`` would give it (0o666 less the umask),
    like any file the student makes in their own folders. The checkpoint is
    serialised in memory first (a few MB), so that a full disk is the plain
    ``OSError`` of the write (``ENOSPC``, ``EDQUOT``), not torch's
    ``RuntimeError`` from its zip writer.

    Raises
    ------
    OSError
        The file could not be written; ``path`` is unchanged and no
        temporary file is left.
    """
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    write_atomically(path, buffer.getvalue(), mode=None)


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


def parse_configs(ckpt: dict[str, Any]) -> tuple[ModelConfig, TrainConfig]:
    """The typed settings stored in a checkpoint (UsageError on a value out of range)."""
    return ModelConfig.from_dict(ckpt["model_config"]), TrainConfig.from_dict(ckpt["train_config"])


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
    state = TrainState(model, optimizer, ckpt.get("epoch", 0), ckpt.get("global_step", 0))
    for key, values in ckpt.get("history", {}).items():
        state.history[key] = list(values)
    return state


def load_model(path: Path, device: str = "cpu") -> Forecaster:
    """The trained forecaster of a checkpoint, in eval mode on ``device``."""
    state = restore_state(load_checkpoint(path), torch.device(device))
    return state.model.eval()
