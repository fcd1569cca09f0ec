"""The reference teaching workload: a chaotic double pendulum forecast by an LSTM.

Modules: ``physics`` (equations, energy, batched RK4, DOP853 reference),
``dataset`` (generation, file format, splits, windows), ``model`` (LSTM
forecasters), ``train`` (training CLI and checkpoints), ``evaluate``
(DP-Buffat-v1 metrics, baselines, plots) and ``pipeline`` (all of it, small).
The entry modules (``dataset``, ``train``, ``evaluate``, ``pipeline``) import
torch, scipy and matplotlib only inside functions, so that thread variables
can be set before those libraries load.
"""
