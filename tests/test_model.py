import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from coursehub.errors import UsageError
from coursehub.pendulum.config import ModelConfig
from coursehub.pendulum.model import (
    Forecaster,
    fit_scaler,
    rollout,
    rollout_loss,
    state_increments,
)
from coursehub.pendulum.physics import integrate_rk4


@pytest.fixture(scope="module")
def states():
    rng = np.random.default_rng(1)
    y0 = np.zeros((6, 4))
    y0[:, [0, 2]] = rng.uniform(-math.pi, math.pi, (6, 2))
    return integrate_rk4(y0, 1 / 30, 60, substeps=4)


def make(arch, states, **kw):
    config = replace(ModelConfig.preset(arch), **kw)
    torch.manual_seed(0)
    return Forecaster(config, fit_scaler(config, states))


@pytest.mark.parametrize("arch", ["lstm", "course"])
def test_shapes(arch, states):
    model = make(arch, states)
    window = torch.as_tensor(states[:3, :10], dtype=torch.float32)
    assert model(window).shape == (3, 4)
    assert model.step(window).shape == (3, 4)
    out = rollout(model, states[:, :10], n_steps=7)
    assert out.shape == (6, 7, 4)
    assert np.isfinite(out).all()


def test_course_architecture_is_the_courses():
    model = make("course", np.zeros((1, 1, 4)) + np.arange(2)[None, :, None])
    assert (model.lstm.input_size, model.lstm.hidden_size, model.lstm.num_layers) == (4, 100, 1)
    assert (model.head.in_features, model.head.out_features) == (100, 4)


def test_rollout_rejects_wrong_context(states):
    with pytest.raises(UsageError, match=r"\(n, 10, 4\)"):
        rollout(make("lstm", states, hidden_size=8, n_layers=1), states[:, :9], n_steps=2)


def test_course_scaler_is_minmax_of_training_states(states):
    scaler = fit_scaler(ModelConfig.preset("course"), states)
    flat = states.reshape(-1, 4)
    np.testing.assert_allclose(scaler.state_offset, flat.min(axis=0))
    np.testing.assert_allclose(scaler.state_scale, flat.max(axis=0) - flat.min(axis=0))


def test_lstm_scaler_uses_increment_std(states):
    scaler = fit_scaler(ModelConfig(), states)
    np.testing.assert_allclose(scaler.step_scale, state_increments(states).reshape(-1, 4).std(0))
    assert scaler.state_scale[0] == 1.0 and scaler.state_scale[1] > 0


def test_lstm_is_blind_to_full_turns(states):
    model = make("lstm", states, hidden_size=16, n_layers=1)
    window = torch.as_tensor(states[:2, :10], dtype=torch.float32)
    turned = window + torch.tensor([2 * math.pi, 0.0, -4 * math.pi, 0.0])
    with torch.no_grad():
        torch.testing.assert_close(model(window), model(turned), atol=2e-5, rtol=0)


def test_step_error_wraps_angles_for_lstm(states):
    model = make("lstm", states, hidden_size=8, n_layers=1)
    true = torch.tensor([[3.1, 0.5, -3.1, 1.0]])
    pred = true + torch.tensor([[2 * math.pi, 0.0, 2 * math.pi, 0.0]])
    assert model.step_error(pred, true).abs().max() < 1e-5


def test_one_step_loss_is_mean_square_step_error(states):
    model = make("lstm", states, hidden_size=8, n_layers=1)
    batch = torch.as_tensor(states[:, :11], dtype=torch.float32)
    with torch.no_grad():
        expected = model.step_error(model.step(batch[:, :10]), batch[:, 10]).pow(2).mean()
        torch.testing.assert_close(rollout_loss(model, batch[:, :10], batch[:, 10:]), expected)


@pytest.mark.parametrize(
    "kw", [{"arch": "gru"}, {"hidden_size": 0}, {"window": 0}, {"dropout": 1.0}]
)
def test_config_rejects_bad_values(kw):
    with pytest.raises(UsageError):
        ModelConfig(**kw)


def test_scaler_rejects_constant_states():
    with pytest.raises(UsageError, match="do not vary"):
        fit_scaler(ModelConfig(), np.zeros((2, 20, 4)))
