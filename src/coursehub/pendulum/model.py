"""LSTM forecasters of the double pendulum and their closed-loop rollout.

Two architectures, chosen by :attr:`coursehub.pendulum.config.ModelConfig.arch`
(settings and presets: :mod:`coursehub.pendulum.config`):

``"lstm"`` (the default)
    Input features ``[sin th1, cos th1, sin th2, cos th2, w1/s1, w2/s2]``
    over a window of past states (``s`` = standard deviation of each angular
    velocity on the training split); output the increment of the state to
    the next sample, ``[d theta1, d omega1, d theta2, d omega2]``, in units
    of the training split's increment standard deviations. Angles enter only
    through sin/cos, so an arm that flips over does not leave the range
    seen in training.

``"course"``
    The model of the course's original notebook: LSTM(4 -> 100) +
    Linear(100 -> 4) on the raw state, MinMax-scaled to [0, 1], predicting
    the next (scaled) state. Kept for comparison.

Scalers are fitted on the training split only (:func:`fit_scaler`) and live
in the model's buffers, so a checkpoint's ``model_state`` carries them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from torch import nn

from coursehub.errors import UsageError
from coursehub.pendulum.config import ModelConfig


@dataclass(frozen=True)
class Scaler:
    """Input and output scales fitted on the training split.

    Attributes
    ----------
    state_offset, state_scale : tuple of 4 floats
        Raw state -> network input: ``(state - offset) / scale``. MinMax for
        ``"course"``; for ``"lstm"`` only the angular velocities are scaled
        (offset 0, scale = their standard deviation; angle entries unused).
    step_scale : tuple of 4 floats
        Network output units: the standard deviation of the one-sample state
        increments (``"lstm"``) or the MinMax range (``"course"``). Errors in
        the training loss are measured in these units.
    """

    state_offset: tuple[float, float, float, float]
    state_scale: tuple[float, float, float, float]
    step_scale: tuple[float, float, float, float]

    def as_dict(self) -> dict[str, list[float]]:
        """Plain lists of floats, safe for ``torch.load(weights_only=True)``."""
        return {k: list(v) for k, v in asdict(self).items()}


def wrap_angle(x: Any) -> Any:
    """Map angles (numpy array or torch tensor) to (-pi, pi] through ``atan2(sin, cos)``."""
    if isinstance(x, torch.Tensor):
        return torch.atan2(torch.sin(x), torch.cos(x))
    return np.arctan2(np.sin(x), np.cos(x))


def state_increments(states: ArrayLike) -> NDArray[np.float64]:
    """One-sample increments of trajectories, angle differences wrapped.

    Parameters
    ----------
    states : array_like, shape (n_traj, n_samples, 4)

    Returns
    -------
    ndarray, shape (n_traj, n_samples - 1, 4)
    """
    s = np.asarray(states, dtype=np.float64)
    d = np.diff(s, axis=1)
    d[..., 0::2] = wrap_angle(d[..., 0::2])
    return d


def fit_scaler(config: ModelConfig, states: ArrayLike) -> Scaler:
    """Fit the scales of ``config.arch`` on training trajectories.

    Parameters
    ----------
    config : ModelConfig
    states : array_like, shape (n_traj, n_samples, 4)
        Training split only (the course's original notebook fitted its
        scaler on test data too, which leaks the test split into training).

    Returns
    -------
    Scaler

    Raises
    ------
    UsageError
        If ``states`` is not (n_traj, n_samples, 4) with two samples or more,
        or a component never varies.
    """
    s = np.asarray(states, dtype=np.float64)
    if s.ndim != 3 or s.shape[-1] != 4 or s.shape[0] * s.shape[1] < 2:
        raise UsageError(f"cannot fit scalers on training states of shape {s.shape}")
    flat = s.reshape(-1, 4)
    if config.arch == "course":
        lo, hi = flat.min(axis=0), flat.max(axis=0)
        rng = hi - lo
        offset, scale, step = lo, rng, rng
    else:
        omega_std = flat[:, 1::2].std(axis=0)
        offset = np.zeros(4)
        scale = np.array([1.0, omega_std[0], 1.0, omega_std[1]])
        step = state_increments(s).reshape(-1, 4).std(axis=0)
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0) and np.all(step > 0)):
        raise UsageError("training states do not vary: cannot fit scalers")
    return Scaler(_four(offset), _four(scale), _four(step))


def _four(x: NDArray[np.float64]) -> tuple[float, float, float, float]:
    a, b, c, d = (float(v) for v in x)
    return (a, b, c, d)


class Forecaster(nn.Module):
    """LSTM over a window of states, predicting the next state.

    Parameters
    ----------
    config : ModelConfig
    scaler : Scaler
        Stored as buffers ``state_offset``, ``state_scale``, ``step_scale``.
    """

    state_offset: torch.Tensor
    state_scale: torch.Tensor
    step_scale: torch.Tensor

    def __init__(self, config: ModelConfig, scaler: Scaler) -> None:
        super().__init__()
        self.config = config
        n_in = 4 if config.arch == "course" else 6
        dropout = config.dropout if config.n_layers > 1 else 0.0
        self.lstm = nn.LSTM(
            n_in, config.hidden_size, config.n_layers, batch_first=True, dropout=dropout
        )
        self.head = nn.Linear(config.hidden_size, 4)
        for name, values in asdict(scaler).items():
            self.register_buffer(name, torch.tensor(values, dtype=torch.float32))

    def features(self, states: torch.Tensor) -> torch.Tensor:
        """Network input (B, window, 4 or 6) from raw states (B, window, 4)."""
        scaled = (states - self.state_offset) / self.state_scale
        if self.config.arch == "course":
            return scaled
        th1, th2 = states[..., 0], states[..., 2]
        trig = [torch.sin(th1), torch.cos(th1), torch.sin(th2), torch.cos(th2)]
        return torch.stack([*trig, scaled[..., 1], scaled[..., 3]], dim=-1)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """Raw network output (B, 4) in ``step_scale`` units for a window (B, window, 4)."""
        out, _ = self.lstm(self.features(states))
        return self.head(out[:, -1])

    def step(self, states: torch.Tensor) -> torch.Tensor:
        """Predicted next state (B, 4) in rad and rad/s from a window (B, window, 4)."""
        out = self(states)
        if self.config.arch == "course":
            return out * self.state_scale + self.state_offset
        return states[:, -1] + out * self.step_scale

    def step_error(self, predicted: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
        """State error (..., 4) in ``step_scale`` units, angles wrapped for ``"lstm"``.

        For ``"course"`` this is the error in MinMax-scaled space, so its mean
        square is the course's MSE loss.
        """
        diff = predicted - true
        if self.config.arch == "lstm":
            diff = torch.cat(
                [
                    wrap_angle(diff[..., :1]),
                    diff[..., 1:2],
                    wrap_angle(diff[..., 2:3]),
                    diff[..., 3:],
                ],
                dim=-1,
            )
        return diff / self.step_scale

    def scaler(self) -> Scaler:
        """The scaler held in the buffers."""
        vals = {n: _four(getattr(self, n).double().cpu().numpy()) for n in _SCALER_FIELDS}
        return Scaler(**vals)


_SCALER_FIELDS = tuple(f.name for f in fields(Scaler))


def rollout_loss(model: Forecaster, context: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean square error of a closed-loop rollout against the true states.

    Parameters
    ----------
    model : Forecaster
    context : Tensor, shape (B, window, 4)
        True past states.
    targets : Tensor, shape (B, K, 4)
        The true next ``K`` states; predictions are fed back for ``K > 1``.

    Returns
    -------
    Tensor, scalar
        Mean over batch, steps and components of the squared
        :meth:`Forecaster.step_error`.
    """
    window, total = context, context.new_zeros(())
    for k in range(targets.shape[1]):
        nxt = model.step(window)
        total = total + model.step_error(nxt, targets[:, k]).pow(2).mean()
        window = torch.cat([window[:, 1:], nxt[:, None]], dim=1)
    return total / targets.shape[1]


@torch.no_grad()
def rollout(
    model: Forecaster, context: ArrayLike, n_steps: int = 100, batch_size: int = 8192
) -> NDArray[np.float64]:
    """Forecast ``n_steps`` samples ahead, feeding each prediction back as input.

    Parameters
    ----------
    model : Forecaster
    context : array_like, shape (n, window, 4)
        The last ``window`` true states of each start, rad and rad/s.
    n_steps : int
        Samples to predict (100 = 3.33 s at dt = 1/30 s in DP-Buffat-v1).
    batch_size : int
        Starts forecast together.

    Returns
    -------
    ndarray, shape (n, n_steps, 4)
        Predicted states at ``dt, 2 dt, ...`` after the last context sample.

    Raises
    ------
    UsageError
        If ``context`` is not (n, window, 4) for the model's window.
    """
    ctx = np.asarray(context, dtype=np.float64)
    window = model.config.window
    if ctx.ndim != 3 or ctx.shape[1:] != (window, 4):
        raise UsageError(f"rollout context must have shape (n, {window}, 4), got {ctx.shape}")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    parts = []
    for lo in range(0, len(ctx), batch_size):
        win = torch.as_tensor(ctx[lo : lo + batch_size], dtype=torch.float32, device=device)
        steps = []
        for _ in range(n_steps):
            nxt = model.step(win)
            steps.append(nxt)
            win = torch.cat([win[:, 1:], nxt[:, None]], dim=1)
        parts.append(torch.stack(steps, dim=1).double().cpu().numpy())
    model.train(was_training)
    return np.concatenate(parts) if parts else np.empty((0, n_steps, 4))


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(math.prod(p.shape) for p in model.parameters() if p.requires_grad)
