"""Workflows that drive a workload through the runner.

Code here sits above both the workload it drives and the runner it drives
it through (``resources`` < ``runner``, ``resources`` < ``pendulum``, and
``pipelines`` may import all three), so neither of those imports the other.

Modules: ``pendulum`` (``coursehub pendulum pipeline``: generate, train in a
fresh interpreter through the runner, evaluate, at a small size).
"""
