"""Autograde every collected submission, each in its own runner job with the course's limits.

One job per submission: ``python -m coursehub.grading.sandbox.kernel autograde
ASSIGNMENT --student S --course-dir DIR`` (nbgrader, with the student's kernel
sandboxed: :mod:`coursehub.grading.sandbox`) through
:func:`coursehub.runner.api.run`, with the environment of
:func:`coursehub.sandbox.env.plan_sandbox_env` (no token, no catalog URL), the course
profile's ``n_threads`` and ``mem_limit`` and a wall-clock ``timeout_s``
(nbgrader itself puts no memory cap on the kernel, nbgrader#1429). Two
limits stop a student's runaway code:

- ``c.Execute.timeout`` (per cell): nbgrader interrupts the cell, records a
  ``CellTimeoutError`` and grades the rest; the outcome names the cell and
  the points lost (:mod:`coursehub.grading.autograde.cells`);
- the runner's ``timeout_s`` and ``mem_limit`` (whole job): the job and its
  kernel are killed; the submission is recorded with a score of 0.

Either way the outcome says what happened, and the other submissions are
graded. Submissions from people not on the roster and notebooks that cannot
be read are reported and not run. The outcomes are kept as JSON in
``<course_dir>/coursehub/autograde-<assignment>.json``. One autograde of an
assignment runs at a time (:mod:`coursehub.grading.autograde.lock`).

Submissions are graded side by side (:mod:`coursehub.grading.autograde.batch`),
as many at once as the runner's admission slots hold jobs of the course's
``n_threads``; gradebook writes are serialised by SQLite's own database
lock (:mod:`coursehub.grading.autograde.gradebook`).

By default one long-lived grading worker per slot grades them, nbgrader imported
once (``COURSEHUB_GRADING_WORKER``). Its modules and what each holds: docs/architecture.md.
"""
