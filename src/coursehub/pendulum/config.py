"""The settings of a forecaster and of its training: typed, validated, one preset per architecture.

The presets are the only defaults (as nanoGPT's ``GPTConfig``): the field
defaults of :class:`ModelConfig` and :class:`TrainConfig` *are* the
``"lstm"`` preset, :data:`MODEL_PRESETS` and :data:`TRAIN_PRESETS` hold one
pair per architecture, and the command line
(:mod:`coursehub.pendulum.train`) fills every option left out from them.
:data:`RUN_PRESETS` holds named runs for a setting (``--preset class``: the
minute of training a student has in class), each a model, its optimisation,
its epochs and its training trajectories.
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


@dataclass(frozen=True)
class RunPreset:
    """A named run for one setting: model, optimisation, epochs and training data.

    Attributes
    ----------
    name : str
        The ``--preset`` value.
    model : ModelConfig
    train : TrainConfig
        Its ``n_epochs`` is the run the preset is sized for (N_EPOCHS of the
        command: a larger one trains longer with the same settings).
    trajectories : int or None
        Training trajectories used (the first of the split; None = all).
    n_threads : int
        Threads the run is sized for (N_THREADS of the command).
    budget_s : float
        Wall-clock seconds of training the run is sized to fit in, on
        ``n_threads`` threads (measured by ``benchmarks/bench_train.py``).
    """

    name: str
    model: ModelConfig
    train: TrainConfig
    trajectories: int | None
    n_threads: int
    budget_s: float

    def describe(self) -> str:
        """One line for ``--help``: the model, the data, the epochs and what it is sized for."""
        m, t = self.model, self.train
        data = "all" if self.trajectories is None else f"{self.trajectories}"
        windows = "all" if t.max_windows is None else f"{t.max_windows:,}"
        return (
            f"{self.name}: {m.arch} {m.n_layers} x {m.hidden_size}, {data} training "
            f"trajectories, {t.n_epochs} epochs of {windows} windows, batch {t.batch_size}, "
            f"lr {t.lr:g}; sized for {self.budget_s:g} s of training on {self.n_threads} threads"
        )


#: name -> run preset. ``"class"``: what a student trains in one minute of class on the
#: 2 threads of a class server, sized by measurement (``benchmarks/bench_train.py``
#: for the throughput, ``benchmarks/bench_quality.py --version 2 --preset class`` for
#: the time and the forecast). Measured by this project on a 2-core machine shared
#: with other work: the whole command takes 26-33 CPU-s (so under 60 s of wall time
#: whenever its 2 threads get one core's worth between them) and 32-79 s wall, median
#: 52 s over five runs (the longest at a load average above 5); chaotic VPT on
#: DP-Buffat-v2 2.63 s, 95 % interval [2.40, 2.83]. Larger candidates cut off at 55 s
#: on the same machine (1 x 128 and 2 x 64 after 600,000 windows, 1 x 96 at batch
#: 128 after 800,000) reached 2.67, 2.57 and 2.70 s, within that interval; a smaller
#: run (4 epochs of 110,000 windows) lost 0.3 s of VPT for 15 % less CPU.
RUN_PRESETS: dict[str, RunPreset] = {
    "class": RunPreset(
        name="class",
        model=ModelConfig(arch="lstm", hidden_size=96, n_layers=1),
        train=TrainConfig(n_epochs=4, batch_size=256, lr=3e-3, max_windows=150_000, lr_decay=0.6),
        trajectories=640,
        n_threads=2,
        budget_s=60.0,
    ),
}
PRESET_NAMES: tuple[str, ...] = tuple(RUN_PRESETS)


def run_preset(name: str) -> RunPreset:
    """The run preset ``name`` (:data:`RUN_PRESETS`).

    Raises
    ------
    UsageError
        If there is none of that name.
    """
    if name not in RUN_PRESETS:
        raise UsageError(f"unknown preset {name!r}: choose one of {PRESET_NAMES}")
    return RUN_PRESETS[name]
