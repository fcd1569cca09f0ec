"""Prometheus exposition of usage per course (``prometheus_client``), bounded labels.

Series (labels: ``course_id``, and ``kind`` for running units; one series per
student only with ``per_student=True``):

* ``coursehub_usage_cpu_seconds_total``: CPU-seconds used (rollup, all days kept);
* ``coursehub_usage_gpu_seconds_total``: GPU-seconds held;
* ``coursehub_usage_running``: servers and jobs running now (an open unit
  whose last record is newer than ``stale_s``).

Names follow the Prometheus naming conventions (``_seconds_total`` for a
counter in seconds: https://prometheus.io/docs/practices/naming/).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from coursehub.catalog.models.usage import UsageDay, UsageUnit

#: Content type of the exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: A unit with no record for this long is not counted as running (three default intervals).
STALE_S = 180.0


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


def render_metrics(session: Session, per_student: bool = False) -> bytes:
    """Return the usage series in Prometheus' text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UsageCollector(session, per_student))
    return generate_latest(registry)
