"""CPU- and GPU-hours per course and per portal for a year: the pure plans and the grouped query."""

from __future__ import annotations

import time

from coursehub.catalog.usage.rollup import apply_records
from coursehub.meter.records import UsageRecord
from coursehub.usage.yearly import (
    CourseHours,
    PortalHours,
    course_seconds,
    plan_course_hours,
    plan_portal_totals,
    render_hours_csv,
)

COURSES = [
    ("MECA", "mlmeca-2025", "Machine learning"),
    ("MECA", "fluids-2025", "Fluids"),
    ("INFO", "algo-2025", "Algorithms"),
]
SECONDS = {"mlmeca-2025": (5400.0, 7200.0, 3), "algo-2025": (1800.0, 0.0, 1), "gone": (9.0, 0, 1)}


def test_every_course_of_the_year_gets_a_row_zeros_where_nothing_was_used():
    assert plan_course_hours(COURSES, SECONDS) == [
        CourseHours("INFO", "algo-2025", "Algorithms", 0.5, 0.0, 1),
        CourseHours("MECA", "mlmeca-2025", "Machine learning", 1.5, 2.0, 3),
        CourseHours("MECA", "fluids-2025", "Fluids", 0.0, 0.0, 0),
    ]


def test_a_portals_total_sums_its_courses():
    assert plan_portal_totals(plan_course_hours(COURSES, SECONDS)) == [
        PortalHours("INFO", 1, 0.5, 0.0, 1),
        PortalHours("MECA", 2, 1.5, 2.0, 3),
    ]


def test_the_csv_has_a_header_and_neutralises_a_formula_in_a_title():
    rows = plan_course_hours([("MECA", "x-2025", "=HYPERLINK(1)")], {})
    lines = render_hours_csv(rows).splitlines()
    assert lines[0] == '"portal","course_id","title","cpu_hours","gpu_hours","units"'
    assert "'=HYPERLINK(1)" in lines[1]


def test_a_courses_seconds_are_summed_over_its_days_and_users(session):
    now = time.time()
    apply_records(
        session,
        [
            UsageRecord(
                "close", "j1", "job", "ada", "alpha", now, now - 60, cpu_s=60.0, gpu_s=60.0
            ),
            UsageRecord("close", "j2", "job", "bob", "alpha", now, now - 60, cpu_s=30.0),
            UsageRecord("close", "j3", "job", "cy", "beta", now, now - 60, cpu_s=5.0),
        ],
    )
    assert course_seconds(session, ["alpha", "none"]) == {"alpha": (90.0, 60.0, 2)}
