"""Benchmark usage accounting: sampling overhead, catalog growth, report time.

1. Sampling overhead (needs root and a writable cgroup filesystem): 100
   server-like cgroups (cpu + memory + cpuacct on v1), each holding a sleeping
   process, opened in one :class:`coursehub.meter.sampler.Sampler`; the CPU
   time (``time.process_time``) of one sampling pass over all of them, repeated
   ``--passes`` times, as a share of one CPU at the default 60 s interval and at
   5 s.
2. Catalog growth per student per semester: a SQLite catalog (migrated) is
   filled with a semester (120 days) of rollup rows and unit rows for
   ``--students`` students in 2 of 30 courses each, active on half of the days
   with one server a day per course (seeded RNG); rows and bytes per student.
3. Report time on that catalog: ``usage_report`` by student (all courses), by
   student for one course, by day, by course; ``--repeat`` times each.

Run: ``.venv/bin/python benchmarks/bench_usage.py`` (about a minute or two).
Figures: median and range (min-max) of wall-clock or CPU seconds on whatever
else the machine is doing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert

from coursehub.catalog.db import make_engine, session_factory
from coursehub.catalog.models.usage import UsageDay, UsageUnit
from coursehub.catalog.schema import upgrade_database
from coursehub.meter.cgroupread import add_cpuacct
from coursehub.meter.sampler import DEFAULT_INTERVAL_S, Sampler
from coursehub.resources.cgroups import CgroupUnavailableError, JobCgroup
from coursehub.usage.report import usage_report

SEMESTER_DAYS = 120


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.4g} (range {min(values):.4g}-{max(values):.4g})"


def bench_sampling(n_servers: int, passes: int) -> None:
    if os.geteuid() != 0:
        print("sampling overhead: skipped (needs root)")
        return
    parent = f"coursehub-bench-{uuid.uuid4().hex[:8]}"
    cgroups: list[JobCgroup] = []
    sleepers: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        sampler = Sampler(Path(tmp), "bench")
        try:
            for index in range(n_servers):
                cgroup = JobCgroup.create(f"s{index}", 1.0, 2**30, parent=parent)
                cgroup = JobCgroup(add_cpuacct(cgroup.plan))
                cgroups.append(cgroup)
                procs = [str(p) for p in cgroup.procs_files]
                sleepers.append(
                    subprocess.Popen(
                        ["sleep", "600"],
                        preexec_fn=lambda procs=procs: [
                            Path(p).write_text(str(os.getpid())) for p in procs
                        ],
                    )
                )
                sampler.open(
                    f"s{index}",
                    "server",
                    f"u{index}",
                    "c",
                    cgroup.plan.version,
                    cgroup.plan.job_dirs,
                )
            cpu, wall = [], []
            for _ in range(passes):
                c0, w0 = time.process_time(), time.perf_counter()
                assert sampler.sample_once() == n_servers
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
            size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        except CgroupUnavailableError as exc:
            print(f"sampling overhead: skipped ({exc})")
            return
        finally:
            for proc in sleepers:
                proc.kill()
                proc.wait()
            for cgroup in cgroups:
                cgroup.remove()
    version = cgroups[0].plan.version if cgroups else "?"
    print(f"sampling {n_servers} servers (cgroup v{version}), {passes} passes:")
    print(f"  CPU seconds per pass: {spread(cpu)}; wall seconds per pass: {spread(wall)}")
    for interval in (DEFAULT_INTERVAL_S, 5.0):
        share = [100 * c / interval for c in cpu]
        print(f"  overhead at one pass every {interval:g} s: {spread(share)} % of one CPU")
    print(f"  usage file: {size / (passes + 1) / n_servers:.0f} bytes per server per sample")


def fill(url: str, students: int, seed: int) -> tuple[int, int]:
    engine = make_engine(url)
    upgrade_database(engine)
    rng = random.Random(seed)
    courses = [f"course{c:02d}-2026" for c in range(30)]
    start = date(2026, 9, 1)
    days, units = [], []
    for s in range(students):
        user = f"p{2600000 + s}"
        for course in rng.sample(courses, 2):
            for d in range(SEMESTER_DAYS):
                if rng.random() >= 0.5:
                    continue
                day = start + timedelta(days=d)
                cpu_s = rng.uniform(60, 4 * 3600)
                peak = rng.randint(2**27, 2**32)
                at = datetime(day.year, day.month, day.day, 9, tzinfo=UTC)
                days.append(
                    dict(
                        course_id=course,
                        day=day,
                        username=user,
                        cpu_s=cpu_s,
                        gpu_s=0.0,
                        mem_peak_bytes=peak,
                        units=1,
                    )
                )
                units.append(
                    dict(
                        unit_id=f"server:hub:{user}::{course}:{d}",
                        kind="server",
                        username=user,
                        course_id=course,
                        started_at=at,
                        last_at=at + timedelta(hours=3),
                        ended_at=at + timedelta(hours=3),
                        cpu_s=cpu_s,
                        mem_peak_bytes=peak,
                        gpu_s=0.0,
                        gpu_peak_bytes=0,
                        exit_reason="stopped",
                    )
                )
    with engine.begin() as connection:
        for table, rows in ((UsageDay, days), (UsageUnit, units)):
            for i in range(0, len(rows), 20_000):
                connection.execute(insert(table), rows[i : i + 20_000])
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return len(days), len(units)


def bench_catalog(students: int, repeat: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "catalog.sqlite"
        url = f"sqlite:///{path}"
        engine = make_engine(url)
        upgrade_database(engine)
        engine.dispose()
        empty = path.stat().st_size
        t0 = time.perf_counter()
        n_days, n_units = fill(url, students, seed)
        filled = time.perf_counter() - t0
        size = path.stat().st_size - empty
        print(f"catalog growth, {students} students x 2 courses, one semester ({SEMESTER_DAYS} d):")
        per = f"{n_days / students:.0f} and {n_units / students:.0f} per student"
        print(f"  rollup rows {n_days}, unit rows {n_units} ({per}); filled in {filled:.1f} s")
        print(
            f"  SQLite bytes (tables + indexes): {size / 2**20:.1f} MiB, "
            f"{size / students / 1024:.1f} KiB per student per semester"
        )
        engine = make_engine(url)
        session = session_factory(engine)()
        cases = {
            "by student, all courses": dict(by="student"),
            "by student, one course": dict(course_id="course07-2026", by="student"),
            "by day, one course": dict(course_id="course07-2026", by="day"),
            "by course": dict(by="course"),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeat):
            for name, kwargs in cases.items():
                t0 = time.perf_counter()
                rows = usage_report(session, **kwargs)  # type: ignore[arg-type]
                times[name].append(time.perf_counter() - t0)
                assert rows
        print(f"report time ({repeat} runs each, wall seconds):")
        for name, values in times.items():
            print(f"  {name}: {spread(values)}")
        session.close()
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--passes", type=int, default=15)
    parser.add_argument("--students", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    bench_sampling(args.servers, args.passes)
    bench_catalog(args.students, args.repeat, args.seed)


if __name__ == "__main__":
    main()
