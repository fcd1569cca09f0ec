"""Benchmarks of the course environment: ``coursehub bench contention``.

Several simulated students train the pendulum LSTM at once on one machine,
each with a CPU quota, in three modes: ``naive`` (torch's default threads,
as in a notebook kernel), ``managed`` (the runner, explicit threads) and
``overcommit`` (the runner's admission control queues them). It reproduces
the JCAD 2024 talk's collapse (two students: 291 s -> 46,129 s each) and its
fix. Modules: :mod:`~coursehub.bench.scenarios` (plan),
:mod:`~coursehub.bench.workload` (the student's job),
:mod:`~coursehub.bench.students` (settings and command line every student shares),
:mod:`~coursehub.bench.contention` (running), :mod:`~coursehub.bench.naive`
(students without the runner), :mod:`~coursehub.bench.summary`
(figures), :mod:`~coursehub.bench.stats` (repeats: paired slowdowns, bootstrap
intervals, noise warnings), :mod:`~coursehub.bench.report` (table, JSON, plot),
:mod:`~coursehub.bench.gpu` (students sharing a GPU), :mod:`~coursehub.bench.cli`.
"""
