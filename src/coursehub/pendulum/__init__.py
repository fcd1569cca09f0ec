"""The reference teaching workload: a chaotic double pendulum forecast by an LSTM.

Its modules and what each holds: docs/architecture.md. The entry modules
(``dataset``, ``train``, ``evaluate``) import torch, scipy and matplotlib only
inside functions, so that thread variables can be set before those libraries
load. The package never imports the runner: the pipeline that trains through
it is :mod:`coursehub.usecases.pendulum_pipeline`.
"""
