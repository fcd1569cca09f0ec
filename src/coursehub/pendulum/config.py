"""The settings of a forecaster and of its training: typed, validated, one preset per architecture.

The presets are the only defaults (as nanoGPT's ``GPTConfig``): the field
defaults of :class:`ModelConfig` and :class:`TrainConfig` *are* the
``"lstm"`` preset, :data:`MODEL_PRESETS` and :data:`TRAIN_PRESETS` hold one
pair per architecture, and the command line
(:mod:`coursehub.pendulum.train`) fills every option left out from them.
A checkpoint stores both configs as ``dataclasses.asdict`` dicts;
``from_dict`` rebuilds them.

This module imports neither torch nor numpy, so presets can be read (and a
command line checked) before the thread count is set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from coursehub.errors import UsageError

ARCHS: tuple[str, ...] = ("lstm", "course")
DEFAULT_ARCH = "lstm"


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a forecaster; the defaults are the ``"lstm"`` preset.

    Attributes
    ----------
    arch : {"lstm", "course"}
        Features and targets (:mod:`coursehub.pendulum.model`).
    hidden_size : int
        LSTM hidden units per layer.
    n_layers : int
        Stacked LSTM layers.
    window : int
        Past samples fed to the network (10 in DP-Buffat-v1,
        :data:`coursehub.pendulum.metrics.CONTEXT`).
    dropout : float
        Dropout between LSTM layers (0 for one layer).

    Raises
    ------
    UsageError
        On an unknown ``arch`` or a value out of range.
    """

    arch: str = "lstm"
    hidden_size: int = 128
    n_layers: int = 2
    window: int = 10
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise UsageError(f"unknown architecture {self.arch!r}: choose one of {ARCHS}")
        for name in ("hidden_size", "n_layers", "window"):
            if getattr(self, name) < 1:
                raise UsageError(f"model {name}={getattr(self, name)} must be >= 1")
        if not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"model dropout={self.dropout} must be in [0, 1)")

    @classmethod
    def preset(cls, arch: str) -> ModelConfig:
        """The preset of ``arch`` (:data:`MODEL_PRESETS`); UsageError if there is none."""
        return MODEL_PRESETS[_known_arch(arch)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Rebuild a config saved with ``dataclasses.asdict`` (unknown keys are an error)."""
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise UsageError(f"model config has unknown fields {sorted(unknown)}")
        return cls(**values)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; the defaults are the ``"lstm"`` preset.

    Attributes
    ----------
    n_epochs : int
        Epochs in the whole run (N_EPOCHS of the command).
    batch_size : int
        Windows per optimiser step.
    lr : float
        Peak learning rate of Adam (:func:`coursehub.pendulum.fitting.plan_lr`).
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

    Raises
    ------
    UsageError
        On a value out of range (each message names the setting).
    """

    n_epochs: int = 10
    batch_size: int = 256
    lr: float = 2e-3
    seed: int = 0
    max_windows: int | None = None
    rollout_steps: int = 1
    noise: float = 0.1
    lr_decay: float = 0.7

    def __post_init__(self) -> None:
        for name in ("n_epochs", "batch_size", "rollout_steps"):
            if getattr(self, name) < 1:
                raise UsageError(f"training {name}={getattr(self, name)} must be >= 1")
        if self.max_windows is not None and self.max_windows < 1:
            raise UsageError(f"training max_windows={self.max_windows} must be >= 1")
        if self.seed < 0:
            raise UsageError(f"training seed={self.seed} must be >= 0")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise UsageError(f"training lr={self.lr} must be > 0")
        if not (math.isfinite(self.noise) and self.noise >= 0):
            raise UsageError(f"training noise={self.noise} must be >= 0")
        if not 0 < self.lr_decay <= 1:
            raise UsageError(f"training lr_decay={self.lr_decay} must be in (0, 1]")

    @classmethod
    def preset(cls, arch: str) -> TrainConfig:
        """The preset of ``arch`` (:data:`TRAIN_PRESETS`); UsageError if there is none."""
        return TRAIN_PRESETS[_known_arch(arch)]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Rebuild a config saved with ``dataclasses.asdict``.

        Keys this version does not know are dropped; keys it knows that are
        missing take the field defaults (every checkpoint written so far
        holds all eight).
        """
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def _known_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise UsageError(f"unknown architecture {arch!r}: choose one of {ARCHS}")
    return arch


#: arch -> model preset. ``"course"``: the course's LSTM(4 -> 100) + Linear(100 -> 4)
#: on windows of 10, as in the course's original notebook.
MODEL_PRESETS: dict[str, ModelConfig] = {
    "lstm": ModelConfig(),
    "course": ModelConfig(arch="course", hidden_size=100, n_layers=1),
}

#: arch -> training preset (``n_epochs`` is always given by the command line).
#: ``"course"``: Adam lr 5e-4, batch size 1, no noise, constant rate
#: (the course's original notebook). ``"lstm"``: minibatches of 256 with input noise
#: and a per-epoch decay, the settings ``benchmarks/bench_quality.py`` checks
#: against the ridge AR(10) baseline.
TRAIN_PRESETS: dict[str, TrainConfig] = {
    "lstm": TrainConfig(),
    "course": TrainConfig(batch_size=1, lr=5e-4, noise=0.0, lr_decay=1.0),
}
