"""Reference forecasters of DP-Buffat-v1: persistence and ridge AR(10).

Both work on numpy arrays of states ``[theta1, omega1, theta2, omega2]``
(rad, rad/s) and return rollouts in the layout of
:func:`coursehub.pendulum.model.rollout`. Expected figures on the benchmark
(measured by this project on the seed-0 dataset; ``benchmarks/bench_quality.py``
prints them): persistence VPT 0.20 / 0.17 / 0.33 s (all /
chaotic / regular); ridge AR(10) NRMSE@1 0.009, NRMSE@10 0.33, VPT 0.60 /
0.37 / 1.60 s, energy drift median 0.19. On DP-Buffat-v2 (10 s ahead,
``bench_quality.py --version 2``): persistence VPT 0.27 / 0.20 / 0.47 s;
ridge AR(10) NRMSE at 1 s 0.57, at 5 s 0.94, VPT 0.67 / 0.43 / 3.03 s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from coursehub.errors import UsageError
from coursehub.pendulum.dataset import make_windows
from coursehub.pendulum.metrics import wrap_angle

FloatArray = NDArray[np.float64]
# Trajectories turned into windows at once while accumulating the normal equations.
CHUNK = 64


def persistence_rollout(context: ArrayLike, n_steps: int = 100) -> FloatArray:
    """Repeat the last context state: (n, window, 4) -> (n, n_steps, 4)."""
    ctx = np.asarray(context, dtype=np.float64)
    return np.repeat(ctx[:, -1:], n_steps, axis=1)


def ar_features(windows: ArrayLike) -> FloatArray:
    """``[sin th1, cos th1, sin th2, cos th2, w1, w2]`` of each sample, flattened per window.

    Parameters
    ----------
    windows : array_like, shape (n, window, 4)

    Returns
    -------
    ndarray, shape (n, 6 * window)
    """
    w = np.asarray(windows, dtype=np.float64)
    th1, w1, th2, w2 = w[..., 0], w[..., 1], w[..., 2], w[..., 3]
    feats = np.stack([np.sin(th1), np.cos(th1), np.sin(th2), np.cos(th2), w1, w2], axis=-1)
    return feats.reshape(len(w), -1)


@dataclass(frozen=True)
class RidgeAR:
    """Linear autoregression on sin/cos/omega features predicting state increments.

    ``increment = [x, 1] @ coef`` with ``x`` = :func:`ar_features` of the
    last ``window`` states; the angle increments are wrapped to (-pi, pi].

    Attributes
    ----------
    coef : ndarray, shape (6 * window + 1, 4)
    window : int
    """

    coef: FloatArray
    window: int

    def predict(self, windows: ArrayLike) -> FloatArray:
        """Next states (n, 4) from windows (n, window, 4)."""
        w = np.asarray(windows, dtype=np.float64)
        x = ar_features(w)
        return w[:, -1] + x @ self.coef[:-1] + self.coef[-1]

    def rollout(self, context: ArrayLike, n_steps: int = 100) -> FloatArray:
        """Closed-loop forecast: (n, window, 4) -> (n, n_steps, 4)."""
        win = np.array(context, dtype=np.float64)
        if win.ndim != 3 or win.shape[1:] != (self.window, 4):
            raise UsageError(f"ridge context must be (n, {self.window}, 4), got {win.shape}")
        out = np.empty((len(win), n_steps, 4))
        for k in range(n_steps):
            out[:, k] = self.predict(win)
            win = np.concatenate([win[:, 1:], out[:, k : k + 1]], axis=1)
        return out


def fit_ridge(states: ArrayLike, window: int = 10, alpha: float = 1e-6) -> RidgeAR:
    """Fit :class:`RidgeAR` in closed form on training trajectories.

    Solves ``(X^T X + alpha n I) coef = X^T Y`` (intercept not penalised)
    over every window of every trajectory, with ``Y`` the wrapped one-sample
    increments; the normal equations are accumulated chunk by chunk.

    Parameters
    ----------
    states : array_like, shape (n_traj, n_samples, 4)
        Training split only.
    window : int
    alpha : float
        Ridge penalty per window (>= 0).

    Returns
    -------
    RidgeAR
    """
    from scipy.linalg import solve

    s = np.asarray(states, dtype=np.float64)
    n_feat = 6 * window + 1
    xtx, xty, n = np.zeros((n_feat, n_feat)), np.zeros((n_feat, 4)), 0
    for lo in range(0, len(s), CHUNK):
        inputs, targets = make_windows(s[lo : lo + CHUNK], window, 1)
        x = np.hstack([ar_features(inputs), np.ones((len(inputs), 1))])
        y = targets[:, 0] - inputs[:, -1]
        y[:, 0::2] = wrap_angle(y[:, 0::2])
        xtx += x.T @ x
        xty += x.T @ y
        n += len(x)
    penalty = alpha * n * np.eye(n_feat)
    penalty[-1, -1] = 0.0
    coef = solve(xtx + penalty, xty, assume_a="pos")
    return RidgeAR(coef=np.asarray(coef), window=window)
