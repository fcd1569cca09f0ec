"""Resuming a training run (``--resume``): the checkpoint's settings win, conflicts are refused.

An option of :data:`coursehub.pendulum.trainsettings.RESUME_FIXED` left out
takes the checkpoint's value; one given with another value is refused
(:func:`plan_resume_conflicts`, pure); :func:`prepare_resume` reads
MODEL_FILE and returns the settings and the training state to continue.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from coursehub.errors import UsageError
from coursehub.pendulum.config import ModelConfig, TrainConfig
from coursehub.pendulum.trainsettings import RESUME_FIXED, TrainRequest


def plan_resume_conflicts(given: Mapping[str, Any], ckpt: dict[str, Any]) -> list[str]:
    """The options given explicitly with another value than the checkpoint's, one line each.

    Parameters
    ----------
    given : mapping
        Options given on the command line (:attr:`TrainRequest.given`).
    ckpt : dict
        A checkpoint (:func:`coursehub.pendulum.checkpoint.load_checkpoint`),
        with its ``model_config``, ``train_config`` and ``data`` sections.

    Returns
    -------
    list of str
        ``checkpoint has lr=0.002, --lr 0.01 given`` for each option of
        :data:`RESUME_FIXED` that differs, in that table's order; empty when
        none does.
    """
    conflicts = []
    for option, (section, key) in RESUME_FIXED.items():
        if given.get(option) is None:
            continue
        held = (ckpt.get(section) or {}).get(key)
        if not _same_setting(held, given[option]):
            flag = "--" + option.replace("_", "-")
            shown = "all" if held is None else held  # max_windows, trajectories
            conflicts.append(f"checkpoint has {key}={shown}, {flag} {given[option]} given")
    return conflicts


def _same_setting(held: Any, given: Any) -> bool:
    """Equal settings; floats to 1e-12 relative (``2e-3`` and ``0.002`` are one value)."""
    if isinstance(held, float) or isinstance(given, float):
        if held is None or isinstance(held, str) or isinstance(given, str):
            return False
        return math.isclose(float(held), float(given), rel_tol=1e-12, abs_tol=0.0)
    return bool(held == given)


def prepare_resume(
    request: TrainRequest, dataset_seed: int, device: Any
) -> tuple[ModelConfig, TrainConfig, int | None, Any]:
    """(ModelConfig, TrainConfig, trajectory limit, TrainState) restored from MODEL_FILE.

    Raises
    ------
    UsageError
        If the checkpoint is unreadable, an option given differs from it,
        or ``--data`` is another dataset (another seed).
    """
    from coursehub.pendulum.checkpoint import load_checkpoint, parse_configs, restore_state

    given = request.given or {}
    ckpt = load_checkpoint(request.model_file, expect_arch=given.get("arch"))
    conflicts = plan_resume_conflicts(given, ckpt)
    if conflicts:
        raise UsageError(
            f"--resume {request.model_file}: " + "; ".join(conflicts) + "; leave those "
            "options out to continue with the checkpoint's settings, or start a new "
            "MODEL_FILE (--force replaces it)"
        )
    if ckpt["data"].get("seed") != dataset_seed:
        raise UsageError(
            f"checkpoint {request.model_file} was trained on another dataset "
            f"(seed {ckpt['data'].get('seed')}, not {dataset_seed})"
        )
    model_config, train_config = parse_configs(ckpt)
    train_config = replace(train_config, n_epochs=request.n_epochs)
    state = restore_state(ckpt, device)
    return model_config, train_config, ckpt["data"].get("trajectories"), state
