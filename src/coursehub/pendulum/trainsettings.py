"""The training command's settings: the typed request, a fresh run's settings, what resume fixes.

:class:`TrainRequest` is what a command line of :mod:`coursehub.pendulum.train`
asks for; :func:`plan_configs` fills a fresh run's settings from the
``--arch`` preset (:mod:`coursehub.pendulum.config`) and the options given;
:func:`preset_options` turns a ``--preset`` into those options;
:data:`RESUME_FIXED` names the options a checkpoint fixes on ``--resume``
(checked by :mod:`coursehub.pendulum.resume`). Pure: no torch, no files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from coursehub.errors import UsageError
from coursehub.pendulum.config import (
    ARCHS,
    DEFAULT_ARCH,
    MODEL_PRESETS,
    TRAIN_PRESETS,
    ModelConfig,
    TrainConfig,
    run_preset,
)
from coursehub.pendulum.dataset import DEFAULT_DATA_PATH

#: Each model or optimisation option -> (checkpoint section, config field) it sets.
#: These are fixed by the checkpoint on ``--resume``: giving one with another
#: value than the checkpoint's is refused.
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
_PRESET_SECTIONS: dict[str, Mapping[str, Any]] = {
    "model_config": MODEL_PRESETS,
    "train_config": TRAIN_PRESETS,
}


def render_preset_help(option: str) -> str:
    """``default: lstm 128, course 100``: the value of each preset for ``option``."""
    section, key = RESUME_FIXED[option]
    presets = _PRESET_SECTIONS[section]
    values = {arch: getattr(presets[arch], key) for arch in ARCHS}
    if len(set(values.values())) == 1:
        return f"default: {values[DEFAULT_ARCH]}"
    return "default: " + ", ".join(f"{arch} {value}" for arch, value in values.items())


def preset_options(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options of :data:`RESUME_FIXED` that ``--preset name`` sets, with those given on top.

    Every option of the table takes the preset's value unless it was given
    on the command line, so a fresh run gets the preset's settings
    (:func:`plan_configs`) and ``--resume`` checks them against the
    checkpoint like options given one by one.

    Parameters
    ----------
    name : str
        A key of :data:`coursehub.pendulum.config.RUN_PRESETS`.
    given : mapping
        Options given explicitly (argparse dest -> value).

    Returns
    -------
    dict
        argparse dest -> value for every option of :data:`RESUME_FIXED`.

    Raises
    ------
    UsageError
        On an unknown preset, or an ``--arch`` other than the preset's.
    """
    preset = run_preset(name)
    if given.get("arch") not in (None, preset.model.arch):
        raise UsageError(
            f"--preset {name} trains the {preset.model.arch!r} architecture; "
            f"leave --arch {given['arch']} out or drop --preset"
        )
    sections: dict[str, Any] = {
        "model_config": preset.model,
        "train_config": preset.train,
    }
    options = {}
    for option, (section, key) in RESUME_FIXED.items():
        if section == "data":
            options[option] = preset.trajectories
        else:
            options[option] = getattr(sections[section], key)
    options.update({k: v for k, v in given.items() if v is not None})
    return options


@dataclass(frozen=True)
class TrainRequest:
    """What a command line asks for, typed.

    Attributes
    ----------
    model_file : Path
    n_epochs, n_threads : int
        N_EPOCHS (the run's total) and N_THREADS.
    data : Path
    device : {"auto", "cpu", "cuda"}
    resume, force, progress : bool
    given : dict
        The options of :data:`RESUME_FIXED` given on the command line
        (argparse dest -> value); those left out are absent.
    """

    model_file: Path
    n_epochs: int
    n_threads: int
    data: Path = DEFAULT_DATA_PATH
    device: str = "auto"
    resume: bool = False
    force: bool = False
    progress: bool = True
    given: Mapping[str, Any] | None = None


def plan_configs(
    n_epochs: int, given: Mapping[str, Any]
) -> tuple[ModelConfig, TrainConfig, int | None]:
    """The settings of a fresh run: the ``--arch`` preset with the options given.

    Parameters
    ----------
    n_epochs : int
    given : mapping
        Options given (argparse dest -> value, :data:`RESUME_FIXED` keys).

    Returns
    -------
    ModelConfig, TrainConfig, int or None
        The last is the ``--trajectories`` limit (None = all).

    Raises
    ------
    UsageError
        If a setting is out of range (the message names it).
    """
    sections: dict[str, dict[str, Any]] = {"model_config": {}, "train_config": {}, "data": {}}
    for option, value in given.items():
        section, key = RESUME_FIXED[option]
        sections[section][key] = value
    arch = given.get("arch") or DEFAULT_ARCH
    model_config = replace(ModelConfig.preset(arch), **sections["model_config"])
    train_config = replace(TrainConfig.preset(arch), n_epochs=n_epochs, **sections["train_config"])
    trajectories = sections["data"].get("trajectories")
    if trajectories is not None and trajectories < 1:
        raise UsageError(f"--trajectories={trajectories} must be >= 1")
    return model_config, train_config, trajectories
