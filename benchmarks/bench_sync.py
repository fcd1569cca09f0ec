"""Benchmark ``hub sync``: 3,000 users in 31 courses against a real JupyterHub.

Seeds a temporary SQLite catalog (31 courses of one active year, 90
teachers leading/teaching/grading 3 courses each, 2,910 students enrolled in
3 courses each, seeded RNG), starts JupyterHub with configurable-http-proxy
(the test fixture's :class:`RunningHub`), then times
:func:`coursehub.hub.sync.sync_catalog`:

1. the first sync (read catalog, read hub, plan, apply), paced by
   ``--target-s``/``--pause-s`` (``--unpaced``: 500 users a request, no pause);
2. no-op re-syncs, ``--repeat`` times each, interleaved (one of each kind per
   round, so that a noisy moment hits every kind alike): the whole catalog,
   the whole catalog with ``--prune``, and one course (what a web edit
   syncs); median and range (min-max) per kind (target: <= 1 s);
3. a one-course change and a sync after one student changes course.

While the first sync runs, a prober starts a login (``GET`` then ``POST
/hub/login``) and a load of ``/hub/home`` every 250 ms, whether or not the
earlier ones have finished, as students arrive at the start of term: its
latency before and during the sync (p50/p95/max) tells whether the paced
writes (:mod:`coursehub.hub.pacing`) let logins through (targets: p95 < 1 s,
max < 2 s). Each login costs the hub's event loop time that the sync waits
for, so the sync's time is only comparable under the same stream of logins.

``--compare N`` times first syncs only: ``N`` rounds of an unpaced and a
paced sync, each on a fresh hub and catalog, in ABBA order (a drift of the
shared machine touches both alike); it prints each run, then per variant
the median sync time, login p95 and max with a 95 % bootstrap interval, and
the median of the paired ratios paced / unpaced.

Then the hub grows: users outside coursehub are created directly with the
hub's API in batches of 1,000 (not timed) up to each of ``--hub-users``
(default 3,000, 10,000 and 20,000), and the no-op syncs are timed at each
size (target: <= 1 s), then a one-course change at the largest size (one
new student in one course, synced as the course app does: that course only;
target: <= 0.5 s).

Run: ``.venv/bin/python benchmarks/bench_sync.py`` (about 15 minutes at
20,000 users on 2 CPUs, mostly creating the extra users) and
``.venv/bin/python benchmarks/bench_sync.py --compare 4`` (about 15 minutes).
The figures are wall-clock seconds on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from coursehub.bench.stats import describe_median
from coursehub.catalog.courses import create_course, create_portal, create_year
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.models.courses import Course, Membership, Person
from coursehub.catalog.profiles import create_profile
from coursehub.catalog.schema import upgrade_database
from coursehub.hub.hubclient import HubClient
from coursehub.hub.pacing import UNPACED, PacePolicy
from coursehub.hub.sync import sync_catalog
from loginprober import Prober, latency_line, percentiles

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


def timed_sync(engine, client: HubClient, pace: PacePolicy, **kwargs) -> dict[str, float]:
    """Run one :func:`sync_catalog` (``kwargs``: course_ids, prune); return seconds and counts."""
    t0 = time.perf_counter()
    with session_scope(engine) as session:
        outcome = sync_catalog(session, client, pace=pace, **kwargs)
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


@dataclass
class FirstSync:
    """The first sync's figures and the prober's logins before and during it."""

    figures: dict[str, float]
    before: list[float]
    during: list[float]
    failures: int

    def lines(self) -> list[str]:
        return [
            latency_line("login before the sync", self.before),
            latency_line("login during the sync", self.during),
            f"{'prober failures':30s} {self.failures}",
        ]


def first_sync(engine, hub, client: TimingClient, pace: PacePolicy) -> FirstSync:
    """Run the first sync while the prober logs in every 250 ms (after 5 s of an idle hub)."""
    prober = Prober(hub.url, "prober", hub.password)
    prober.login_once()  # the prober's user exists before the sync
    with prober:
        time.sleep(5.0)  # the latency of an idle hub
        t_sync = time.perf_counter()
        figures = timed_sync(engine, client, pace)
        t_end = time.perf_counter()
    before, during = prober.between(0, t_sync), prober.between(t_sync, t_end)
    return FirstSync(figures, before, during, prober.failures)


def compare_first_syncs(args: argparse.Namespace, paced: PacePolicy) -> None:
    """Time first syncs unpaced and paced, ``args.compare`` rounds in ABBA order, fresh hubs.

    Prints each run, then per variant the median sync time and login
    p95/max with a 95 % bootstrap interval, and the median of the paired
    ratios paced / unpaced of the same round.
    """
    variants = {"unpaced": UNPACED, "paced": paced}
    runs: dict[str, list[FirstSync]] = {name: [] for name in variants}
    for round_ in range(args.compare):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for name in order:
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite:///{tmp}/catalog.sqlite"
                engine = make_engine(url)
                upgrade_database(engine)
                seed_catalog(url, args.courses, args.teachers, args.students, args.seed)
                hub = start_hub(Path(tmp))
                try:
                    client = TimingClient(hub.api_url, hub.token)
                    run = first_sync(engine, hub, client, variants[name])
                finally:
                    hub.stop()
            runs[name].append(run)
            p50, p95, top = percentiles(run.during)
            requests_s = sum(client.seconds.values())
            print(
                f"round {round_} {name:8s} sync {run.figures['total_s']:.1f} s "
                f"({int(run.figures['requests'])} requests, {requests_s:.1f} s in them), "
                f"{len(run.during)} logins during it: p50 {p50:.2f} s, p95 {p95:.2f} s, "
                f"max {top:.2f} s, {run.failures} failed",
                flush=True,
            )
    for name, variant_runs in runs.items():
        print(f"{name} ({variants[name]}):")
        figures = {
            "sync": ([r.figures["total_s"] for r in variant_runs], " s"),
            "login p95": ([percentiles(r.during)[1] for r in variant_runs], " s"),
            "login max": ([percentiles(r.during)[2] for r in variant_runs], " s"),
            "logins started during the sync": ([len(r.during) for r in variant_runs], ""),
        }
        for label, (values, unit) in figures.items():
            print("  " + describe_median(label, values, unit))
    ratios = [
        p.figures["total_s"] / u.figures["total_s"]
        for u, p in zip(runs["unpaced"], runs["paced"], strict=True)
    ]
    print(describe_median("paced / unpaced sync time (paired)", ratios, "x"))


def grow_hub(admin: HubClient, n_users: int, batch: int = 1000) -> None:
    """Create users outside coursehub (``x0000000``...) until the hub has ``n_users``."""
    have = admin.count_users()
    names = [f"x{i:07d}" for i in range(have, n_users)]
    for start in range(0, len(names), batch):
        admin.create_users(names[start : start + batch], chunk_size=batch)


def add_student(engine, course_id: str, username: str) -> None:
    """Add a new student to one course (a one-course change)."""
    with session_scope(engine) as session:
        course = session.query(Course).filter_by(course_id=course_id).one()
        person = Person(username=username)
        session.add(person)
        session.add(Membership(person=person, course=course, role="student"))


def time_noops(engine, client, pace, repeat: int, size: int) -> None:
    """Time ``repeat`` rounds of each kind of no-op sync; print median and range."""
    kinds = {
        "no-op catalog": {},
        "no-op catalog (prune)": {"prune": True},
        "no-op one course": {"course_ids": ["ue00-2025"]},
    }
    runs: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _round in range(repeat):
        for kind, kwargs in kinds.items():
            client.seconds.clear()
            figures = timed_sync(engine, client, pace, **kwargs)
            assert figures["requests"] == 0, figures
            runs[kind].append(figures["total_s"])
            if _round == 0:
                report(client, f"{kind} @{size}", figures)
    for kind, seconds in runs.items():
        median, low, high = statistics.median(seconds), min(seconds), max(seconds)
        print(
            f"{kind + f' @{size}':30s} median {median:.3f} s, range {low:.3f}-{high:.3f} s "
            f"over {len(seconds)} runs"
        )


def parse_args() -> argparse.Namespace:
    """Return the benchmark's options (see the module)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--courses", type=int, default=31)
    parser.add_argument("--teachers", type=int, default=90)
    parser.add_argument("--students", type=int, default=2910)
    parser.add_argument("--target-s", type=float, default=PacePolicy().target_s)
    parser.add_argument("--pause-s", type=float, default=PacePolicy().pause_s)
    parser.add_argument("--pause-every-s", type=float, default=PacePolicy().pause_every_s)
    parser.add_argument("--unpaced", action="store_true", help="one request per 500 users")
    parser.add_argument(
        "--hub-users", default="3000,10000,20000", help="hub sizes of the no-op syncs"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=7, help="no-op syncs of each kind (>= 5)")
    parser.add_argument(
        "--compare",
        type=int,
        default=0,
        metavar="N",
        help="only first syncs: N rounds of unpaced and paced, interleaved, on fresh hubs",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    paced = PacePolicy(
        target_s=args.target_s, pause_s=args.pause_s, pause_every_s=args.pause_every_s
    )
    if args.compare:
        compare_first_syncs(args, paced)
        return 0
    pace = UNPACED if args.unpaced else paced
    sizes = sorted(int(n) for n in args.hub_users.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/catalog.sqlite"
        engine = make_engine(url)
        upgrade_database(engine)
        t0 = time.perf_counter()
        seed_catalog(url, args.courses, args.teachers, args.students, args.seed)
        print(f"catalog seeded in {time.perf_counter() - t0:.1f} s; pace {pace}")
        hub = start_hub(Path(tmp))
        try:
            client = TimingClient(hub.api_url, hub.token)
            admin = HubClient(hub.api_url, hub.admin_token)
            first = first_sync(engine, hub, client, pace)
            report(client, "first sync", first.figures)
            for line in first.lines():
                print(line)
            for size in sizes:
                t0 = time.perf_counter()
                grow_hub(admin, size)
                print(
                    f"hub grown to {admin.count_users()} users in {time.perf_counter() - t0:.0f} s"
                )
                time_noops(engine, client, pace, args.repeat, size)
            add_student(engine, "ue00-2025", "p9999999")
            client.seconds.clear()
            one = timed_sync(engine, client, pace, course_ids=["ue00-2025"])
            report(client, f"one-course change @{sizes[-1]}", one)
            move_one_student(engine)
            client.seconds.clear()
            report(client, f"one student moved @{sizes[-1]}", timed_sync(engine, client, pace))
        finally:
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
