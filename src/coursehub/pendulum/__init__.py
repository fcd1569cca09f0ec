"""The reference teaching workload: a chaotic double pendulum forecast by an LSTM.

Modules: ``physics`` (equations, energy, batched RK4, DOP853 reference),
``dataset`` (generation, file format, splits, windows), ``config`` (model and
training settings, one preset per architecture), ``model`` (LSTM
forecasters), ``fitting`` (the training loop), ``checkpoint`` (the
checkpoint format), ``train`` (the training command), ``trainsettings``
(its typed request and a fresh run's settings), ``resume`` (continuing a
checkpoint) and ``evaluate`` (DP-Buffat-v1 metrics, baselines, plots). The
entry modules (``dataset``, ``train``, ``evaluate``) import torch, scipy and
matplotlib only inside functions, so that thread variables can be set before
those libraries load. The package
never imports the runner: the pipeline that trains through it is
:mod:`coursehub.usecases.pendulum_pipeline`.
"""
