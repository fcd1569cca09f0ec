"""``coursehub course budget``: a course's weekly compute budget and its per-student overrides.

::

    coursehub course budget mlmeca-2026 --cpu-hours 20 --gpu-hours 4   # each student, per week
    coursehub course budget mlmeca-2026 --cpu-hours ''                  # no CPU budget
    coursehub course budget mlmeca-2026 --student p2501001 --cpu-hours 40 --by mbuffat
    coursehub course budget mlmeca-2026                                 # print them

Figures are checked by :func:`coursehub.meter.budget.parse_hours` (the same
one-line messages as the course page and the API). The hub reads the budget
at the next spawn; nothing else needs to run.
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from typing import Any

#: The help line of ``coursehub course budget``.
BUDGET_HELP = "set or show a course's weekly CPU-/GPU-hours budget per student"


def add_budget_arguments(sub: argparse.ArgumentParser) -> None:
    """Add the options of ``coursehub course budget`` to its parser."""
    sub.add_argument("course_id", metavar="COURSE_ID")
    sub.add_argument("--cpu-hours", metavar="H", help="CPU-hours per student per week; '' for none")
    sub.add_argument("--gpu-hours", metavar="H", help="GPU-hours per student per week; '' for none")
    sub.add_argument(
        "--student", metavar="USER", help="set this student's own budget (both '': the course's)"
    )
    sub.add_argument("--by", metavar="USER", help="who sets the student's budget (default: you)")


def budget_work(args: argparse.Namespace) -> Callable[[Any], None]:
    """Return the work of ``coursehub course budget``: set (if asked), then print the course's
    budget and its overrides (run in one transaction by :mod:`coursehub.admin.cli`)."""
    from coursehub.catalog.budgets import (
        course_budget,
        list_overrides,
        set_course_budget,
        set_override,
    )
    from coursehub.catalog.courses import get_course
    from coursehub.meter.budget import WeeklyBudget, parse_hours

    def work(session: Any) -> None:
        course = get_course(session, args.course_id)
        old = course_budget(course)
        cpu = (
            old.cpu_hours if args.cpu_hours is None else parse_hours(args.cpu_hours, "--cpu-hours")
        )
        gpu = (
            old.gpu_hours if args.gpu_hours is None else parse_hours(args.gpu_hours, "--gpu-hours")
        )
        if args.student:
            budget = WeeklyBudget(
                parse_hours(args.cpu_hours, "--cpu-hours"),
                parse_hours(args.gpu_hours, "--gpu-hours"),
            )
            set_override(session, course, args.student, budget, args.by or getpass.getuser())
        elif args.cpu_hours is not None or args.gpu_hours is not None:
            set_course_budget(course, WeeklyBudget(cpu, gpu))
        print(f"course {course.course_id}: {render_budget(course_budget(course))} per student")
        for row in list_overrides(session, course):
            when = f"{row.set_at:%Y-%m-%d %H:%M} UTC"
            print(f"  {row.username}: {render_budget(row.budget)} (set by {row.set_by}, {when})")

    return work


def render_budget(budget: Any) -> str:
    """Return ``"20 CPU-hours, 4 GPU-hours a week"`` (``no limit`` for a missing figure)."""
    cpu = "no CPU limit" if budget.cpu_hours is None else f"{budget.cpu_hours:g} CPU-hours"
    gpu = "no GPU limit" if budget.gpu_hours is None else f"{budget.gpu_hours:g} GPU-hours"
    return f"{cpu}, {gpu} a week"
