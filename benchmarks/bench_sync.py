"""Benchmark ``hub sync``: 3,000 users in 31 courses against a real JupyterHub.

Seeds a temporary SQLite catalog (31 courses of one active year, 90
teachers leading/teaching/grading 3 courses each, 2,910 students enrolled in
3 courses each, seeded RNG), starts JupyterHub with configurable-http-proxy
(the test fixture's :class:`RunningHub`, unless ``--hub-url`` names a running
hub), then times :func:`coursehub.hub.sync.sync_catalog`:

1. the first sync (read catalog, read hub, plan, apply), users created in
   chunks of ``--chunk-size`` and members added in one request per group;
2. no-op re-syncs, ``--repeat`` times each, interleaved (one of each kind per
   round, so that a noisy moment hits every kind alike): the whole catalog
   (target: <= 1 s), the whole catalog with the user list read (what
   ``--prune`` reads), and one course (what a web edit syncs); median and
   range (min-max) per kind;
3. a sync after one student changes course.

Run: ``.venv/bin/python benchmarks/bench_sync.py`` (about a minute). The
figures are wall-clock seconds on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from coursehub.catalog.courses import create_course, create_portal, create_year
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.models import Membership, Person
from coursehub.catalog.profiles import create_profile
from coursehub.catalog.schema import upgrade_database
from coursehub.hub.hubclient import HubClient
from coursehub.hub.sync import sync_catalog

ROOT = Path(__file__).resolve().parents[1]


class TimingClient(HubClient):
    """A client that adds up the seconds spent per kind of request (method, first path part)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seconds: dict[str, float] = {}

    def send(self, method, path, **kwargs):
        parts = path.strip("/").split("/")
        kind = f"{method} /{parts[0]}" + (f"/*/{parts[2]}" if len(parts) > 2 else "")
        t0 = time.perf_counter()
        try:
            return super().send(method, path, **kwargs)
        finally:
            self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - t0


def seed_catalog(url: str, n_courses: int, n_teachers: int, n_students: int, seed: int) -> None:
    """Fill an empty catalog: courses with a profile, a teaching team and students."""
    rng = random.Random(seed)
    with session_scope(make_engine(url)) as session:
        year = create_year(session, "2025-2026")
        portal = create_portal(session, "MECA", "Mécanique")
        profile = create_profile(session, "cpu2", cpu_limit=2, mem_limit="4G")
        courses = [
            create_course(session, f"UE{i:02d}", f"Course {i}", year, portal, profile=profile)
            for i in range(n_courses)
        ]
        teachers = [Person(username=f"t{i:03d}") for i in range(n_teachers)]
        students = [Person(username=f"p{2500000 + i}") for i in range(n_students)]
        session.add_all(teachers + students)
        session.flush()
        roles = ("lead", "teacher", "grader")
        for i, teacher in enumerate(teachers):  # 3 distinct courses: 7 and 14 are not 0 mod 31
            for k in range(3):
                course = courses[(i + k * 7) % n_courses]
                session.add(Membership(person=teacher, course=course, role=roles[k]))
        for student in students:
            for course in rng.sample(courses, 3):
                session.add(Membership(person=student, course=course, role="student"))


def timed_sync(engine, client: HubClient, chunk_size: int, **kwargs) -> dict[str, float]:
    """Run one :func:`sync_catalog` (``kwargs``: course_ids, prune); return seconds and counts."""
    t0 = time.perf_counter()
    with session_scope(engine) as session:
        outcome = sync_catalog(session, client, chunk_size=chunk_size, **kwargs)
    total = time.perf_counter() - t0
    if not outcome.ok or outcome.plan is None:
        raise SystemExit(f"sync failed: {outcome.report}")
    counts = outcome.plan.counts()
    return {
        "total_s": total,
        "requests": outcome.report.requests,
        "users_created": counts["create_users"],
        "members_added": counts["add_members"],
        "members_removed": counts["remove_members"],
    }


def move_one_student(engine) -> None:
    """Move one student from one course to another (a 2-membership change)."""
    with session_scope(engine) as session:
        membership = session.query(Membership).filter_by(role="student").first()
        assert membership is not None
        mine = session.query(Membership.course_pk).filter_by(person_pk=membership.person_pk)
        taken = {pk for (pk,) in mine}
        free = session.query(Membership.course_pk).filter(~Membership.course_pk.in_(taken)).first()
        assert free is not None
        membership.course_pk = free[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--courses", type=int, default=31)
    parser.add_argument("--teachers", type=int, default=90)
    parser.add_argument("--students", type=int, default=2910)
    parser.add_argument("--chunk-size", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=7, help="no-op syncs of each kind (>= 5)")
    parser.add_argument("--hub-url", help="use this running hub (empty!) instead of starting one")
    parser.add_argument("--token-env", default="COURSEHUB_HUB_API_TOKEN")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/catalog.sqlite"
        engine = make_engine(url)
        upgrade_database(engine)
        t0 = time.perf_counter()
        seed_catalog(url, args.courses, args.teachers, args.students, args.seed)
        print(f"catalog seeded in {time.perf_counter() - t0:.1f} s")
        hub = None if args.hub_url else start_hub(Path(tmp))
        try:
            client = (
                TimingClient(args.hub_url, os.environ[args.token_env])
                if hub is None
                else TimingClient(hub.api_url, hub.token)
            )
            report(client, "first sync", timed_sync(engine, client, args.chunk_size))
            kinds = {
                "no-op catalog": {},
                "no-op catalog + users (prune)": {"prune": True},
                "no-op one course": {"course_ids": ["ue00-2025"]},
            }
            runs: dict[str, list[float]] = {kind: [] for kind in kinds}
            for _round in range(args.repeat):
                for kind, kwargs in kinds.items():
                    client.seconds.clear()
                    figures = timed_sync(engine, client, args.chunk_size, **kwargs)
                    assert figures["requests"] == 0, figures
                    runs[kind].append(figures["total_s"])
                    if _round == 0:
                        report(client, kind, figures)
            for kind, seconds in runs.items():
                median, low, high = statistics.median(seconds), min(seconds), max(seconds)
                print(
                    f"{kind:30s} median {median:.3f} s, range {low:.3f}-{high:.3f} s "
                    f"over {len(seconds)} runs"
                )
            move_one_student(engine)
            client.seconds.clear()
            report(client, "one student moved", timed_sync(engine, client, args.chunk_size))
        finally:
            if hub is not None:
                hub.stop()
    print(f"({os.cpu_count()} CPUs seen; timings are rough on a shared machine)")
    return 0


def start_hub(workdir: Path):
    """Start a hub with the test fixture's :class:`RunningHub` (tests/hubfixture.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import free_port
    from hubfixture import RunningHub, find_proxy

    proxy = find_proxy()
    if proxy is None:
        raise SystemExit("configurable-http-proxy not found (make setup installs it)")
    hub = RunningHub(
        workdir / "hub", proxy, {n: free_port() for n in ("public", "hub", "proxy_api")}
    )
    hub.workdir.mkdir()
    t0 = time.perf_counter()
    hub.start()
    print(f"hub started in {time.perf_counter() - t0:.1f} s")
    return hub


def report(client: TimingClient, label: str, figures: dict[str, float]) -> None:
    """Print one sync's figures and the seconds per kind of request."""
    print(f"{label:30s} " + "  ".join(_fmt(k, v) for k, v in figures.items()))
    print(" " * 31 + "  ".join(f"{k}: {v:.3f} s" for k, v in client.seconds.items()))


def _fmt(key: str, value: float) -> str:
    return f"{key}={value:.2f}" if key.endswith("_s") else f"{key}={int(value)}"


if __name__ == "__main__":
    raise SystemExit(main())
