"""What a student's kernel must not see when it is autograded, and the check that it can start.

Every kernel of a course's autograde (coursehub's jobs, the formgrader's
"autograde" button, ``nbgrader autograde`` in the course directory) is
started in the plan of :func:`coursehub.sandbox.plan.make_plan` with the
folders of :func:`plan_hidden` covered; :func:`check_sandbox` starts that
plan's interpreter once before a batch
(:func:`coursehub.sandbox.preflight.check_plan`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from coursehub.grading.layout import CourseLayout


def plan_hidden(layout: CourseLayout, environ: Mapping[str, str]) -> list[str]:
    """Return the folders the student's kernel must not see (pure).

    The parent of every course directory (sources, releases, submissions,
    gradebooks), the exchange, the runner's slots and the catalog's data
    folder (:func:`coursehub.settings.data_dir`).
    """
    return plan_hidden_paths(layout.course_dir, layout.exchange_root, environ)


def plan_hidden_paths(
    course_dir: str | Path, exchange_root: str | Path, environ: Mapping[str, str]
) -> list[str]:
    """Return the folders of :func:`plan_hidden` for a course directory and exchange (pure)."""
    from coursehub.runner.slots import DEFAULT_SLOTS_DIR
    from coursehub.settings import data_dir

    slots = environ.get("COURSEHUB_SLOTS_DIR") or str(DEFAULT_SLOTS_DIR)
    folders = [Path(course_dir).parent, Path(exchange_root), Path(slots), data_dir(environ)]
    return sorted({str(folder) for folder in folders})


def check_sandbox(layout: CourseLayout) -> None:
    """Check, before anything is graded, that the kernels' sandbox can start here.

    Builds the plan every kernel of ``layout`` gets
    (:func:`coursehub.sandbox.plan.make_plan` with :func:`plan_hidden`) and
    starts its interpreter once (:func:`coursehub.sandbox.preflight.check_plan`).

    Raises
    ------
    CoursehubError
        One line naming what the sandbox account cannot reach and what to
        change (e.g. a virtualenv under ``/root`` on a host without mount
        namespaces), or why the account cannot be had.
    """
    from coursehub.sandbox.plan import make_plan
    from coursehub.sandbox.preflight import check_plan

    check_plan(make_plan(plan_hidden(layout, os.environ)))
