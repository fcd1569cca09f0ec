"""The settings dataclasses: one preset per architecture, the only defaults, always valid."""

from dataclasses import asdict, fields, replace

import pytest

from coursehub.errors import UsageError
from coursehub.pendulum.config import (
    ARCHS,
    DEFAULT_ARCH,
    MODEL_PRESETS,
    TRAIN_PRESETS,
    ModelConfig,
    TrainConfig,
)


def test_the_field_defaults_are_the_default_architectures_preset():
    assert DEFAULT_ARCH in ARCHS
    assert ModelConfig() == MODEL_PRESETS[DEFAULT_ARCH] == ModelConfig.preset(DEFAULT_ARCH)
    assert TrainConfig() == TRAIN_PRESETS[DEFAULT_ARCH] == TrainConfig.preset(DEFAULT_ARCH)


def test_every_architecture_has_one_model_preset_and_one_training_preset():
    assert tuple(MODEL_PRESETS) == tuple(TRAIN_PRESETS) == ARCHS
    for arch in ARCHS:
        assert ModelConfig.preset(arch).arch == arch


def test_the_course_presets_are_the_courses_model_and_optimiser():
    model, train = ModelConfig.preset("course"), TrainConfig.preset("course")
    assert (model.hidden_size, model.n_layers, model.window) == (100, 1, 10)
    assert (train.batch_size, train.lr, train.noise, train.lr_decay) == (1, 5e-4, 0.0, 1.0)


def test_the_lstm_preset_trains_with_input_noise_and_a_decaying_rate():
    train = TrainConfig.preset("lstm")
    assert (train.batch_size, train.lr, train.noise, train.lr_decay) == (256, 2e-3, 0.1, 0.7)


@pytest.mark.parametrize("config_class", [ModelConfig, TrainConfig])
def test_an_unknown_architecture_has_no_preset(config_class):
    with pytest.raises(UsageError, match="unknown architecture 'gru'"):
        config_class.preset("gru")


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        ({"n_epochs": 0}, "n_epochs=0"),
        ({"batch_size": 0}, "batch_size=0"),
        ({"rollout_steps": -1}, "rollout_steps=-1"),
        ({"max_windows": 0}, "max_windows=0"),
        ({"seed": -1}, "seed=-1"),
        ({"lr": 0.0}, "lr=0.0"),
        ({"lr": float("nan")}, "lr=nan"),
        ({"lr": float("inf")}, "lr=inf"),
        ({"noise": -0.1}, "noise=-0.1"),
        ({"noise": float("nan")}, "noise=nan"),
        ({"lr_decay": 0.0}, "lr_decay=0.0"),
        ({"lr_decay": 1.5}, "lr_decay=1.5"),
    ],
)
def test_a_training_setting_out_of_range_is_refused_by_name(kw, named):
    for arch in ARCHS:
        with pytest.raises(UsageError, match=named):
            replace(TrainConfig.preset(arch), **kw)


@pytest.mark.parametrize(
    "kw", [{"arch": "gru"}, {"hidden_size": 0}, {"n_layers": 0}, {"window": 0}, {"dropout": 1.0}]
)
def test_a_model_setting_out_of_range_is_refused(kw):
    with pytest.raises(UsageError):
        replace(ModelConfig(), **kw)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_preset_survives_a_checkpoint_round_trip(arch):
    model, train = ModelConfig.preset(arch), TrainConfig.preset(arch)
    assert ModelConfig.from_dict(asdict(model)) == model
    assert TrainConfig.from_dict(asdict(train)) == train


def test_a_stored_training_config_keeps_its_own_values_not_todays_defaults():
    stored = {f.name: getattr(TrainConfig.preset("course"), f.name) for f in fields(TrainConfig)}
    assert TrainConfig.from_dict({**stored, "added_later": 1}) == TrainConfig.preset("course")
    with pytest.raises(UsageError, match="unknown fields"):
        ModelConfig.from_dict({**asdict(ModelConfig()), "added_later": 1})
