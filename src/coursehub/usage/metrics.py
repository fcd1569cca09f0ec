"""Prometheus exposition of usage per course (``prometheus_client``), bounded labels.

Series (labels: ``course_id``, and ``kind`` for running units; one series per
student only with ``per_student=True``):

* ``coursehub_usage_cpu_seconds_total``: CPU-seconds used (rollup, all days kept);
* ``coursehub_usage_gpu_seconds_total``: GPU-seconds held;
* ``coursehub_usage_running``: servers and jobs running now (an open unit
  whose last record is newer than ``stale_s``);
* ``coursehub_homes_near_quota`` (label ``homes``, the folder of homes): students'
  homes at :data:`coursehub.homequota.survey.NEAR_PERCENT` % of their quota or
  more, and ``coursehub_homes_quota_read``: the homes with a quota whose use
  was read (:func:`coursehub.homequota.survey.survey_homes`, at most every
  :data:`HOMES_MAX_AGE_S` seconds); with ``per_student=True`` also
  ``coursehub_home_quota_used_percent`` (label ``username``) of each home near
  its quota.

Names follow the Prometheus naming conventions (``_seconds_total`` for a
counter in seconds: https://prometheus.io/docs/practices/naming/).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from coursehub.catalog.models.usage import UsageDay, UsageUnit
from coursehub.homequota.survey import NEAR_PERCENT, HomesSurvey, survey_homes

#: Content type of the exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: A unit with no record for this long is not counted as running (three default intervals).
STALE_S = 180.0
#: Seconds a survey of the homes is reused by the next scrapes (one file system reading
#: per limited home, e.g. ``btrfs qgroup show``, each time it is made).
HOMES_MAX_AGE_S = 300.0
#: folder of homes -> (monotonic time of the survey, the survey)
_SURVEYS: dict[Path, tuple[float, HomesSurvey]] = {}


class UsageCollector(Collector):
    """Collect the usage series from the catalog at scrape time."""

    def __init__(self, session: Session, per_student: bool = False, stale_s: float = STALE_S):
        self.session, self.per_student, self.stale_s = session, per_student, stale_s

    def collect(self) -> Iterator[Metric]:
        """Yield the CPU, GPU and running series."""
        labels = ["course_id", "username"] if self.per_student else ["course_id"]
        keys = [UsageDay.course_id, UsageDay.username][: len(labels)]
        cpu = CounterMetricFamily(
            "coursehub_usage_cpu_seconds", "CPU-seconds used by servers and jobs", labels=labels
        )
        gpu = CounterMetricFamily(
            "coursehub_usage_gpu_seconds", "GPU-seconds held by servers and jobs", labels=labels
        )
        query = select(*keys, func.sum(UsageDay.cpu_s), func.sum(UsageDay.gpu_s)).group_by(*keys)
        for *key, cpu_s, gpu_s in self.session.execute(query):
            cpu.add_metric([str(k) for k in key], float(cpu_s or 0.0))
            gpu.add_metric([str(k) for k in key], float(gpu_s or 0.0))
        running = GaugeMetricFamily(
            "coursehub_usage_running", "servers and jobs running now", labels=["course_id", "kind"]
        )
        since = datetime.now(UTC) - timedelta(seconds=self.stale_s)
        counted = (
            select(UsageUnit.course_id, UsageUnit.kind, func.count())
            .where(UsageUnit.ended_at.is_(None), UsageUnit.last_at >= since)
            .group_by(UsageUnit.course_id, UsageUnit.kind)
        )
        for course_id, kind, count in self.session.execute(counted):
            running.add_metric([course_id, kind], float(count))
        yield from (cpu, gpu, running)


class HomesCollector(Collector):
    """Collect the homes near their quota from a survey (:func:`cached_survey`)."""

    def __init__(self, root: Path, survey: HomesSurvey, per_student: bool = False):
        self.root, self.survey, self.per_student = root, survey, per_student

    def collect(self) -> Iterator[Metric]:
        """Yield the near-quota and read counts, and each near home's percent per student."""
        near = GaugeMetricFamily(
            "coursehub_homes_near_quota",
            f"students' homes at {NEAR_PERCENT:g} % of their quota or more",
            labels=["homes"],
        )
        near.add_metric([str(self.root)], float(len(self.survey.near)))
        read = GaugeMetricFamily(
            "coursehub_homes_quota_read",
            "students' homes with a quota whose use was read",
            labels=["homes"],
        )
        read.add_metric([str(self.root)], float(self.survey.read))
        yield from (near, read)
        if self.per_student:
            percent = GaugeMetricFamily(
                "coursehub_home_quota_used_percent",
                "percent of the quota used, of each home near its quota",
                labels=["username"],
            )
            for user, value in self.survey.near:
                percent.add_metric([user], value)
            yield percent


def cached_survey(session: Session, root: Path, max_age_s: float = HOMES_MAX_AGE_S) -> HomesSurvey:
    """Return the survey of ``root``'s homes, made again when older than ``max_age_s``.

    The limits are the catalog's (:func:`coursehub.homequota.plan.student_quotas`
    with the department's default).
    """
    from coursehub.homequota.plan import department_default, student_quotas

    made = _SURVEYS.get(root)
    if made is not None and time.monotonic() - made[0] < max_age_s:
        return made[1]
    survey = HomesSurvey()
    if root.is_dir():
        survey = survey_homes(student_quotas(session, department_default()), root, NEAR_PERCENT)
    _SURVEYS[root] = (time.monotonic(), survey)
    return survey


def render_metrics(session: Session, per_student: bool = False, homes: Path | None = None) -> bytes:
    """Return the usage series (and, with ``homes``, its homes' quota series) as Prometheus text."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UsageCollector(session, per_student))
    if homes is not None:
        registry.register(HomesCollector(homes, cached_survey(session, homes), per_student))
    return generate_latest(registry)
