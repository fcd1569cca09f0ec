"""Roster import benchmark: a generated first-year cohort into a fresh catalog.

Times the three steps of ``coursehub roster import`` (parse, plan, apply) and
their total for a roster of ``--rows`` students (default 1,500: a first-year
cohort), each run on a fresh, migrated database, on SQLite and PostgreSQL.
Target: total <= 2 s. PostgreSQL is a throwaway server made like the test
fixture (``tests/conftest.py``), or the empty database given by
``--database-url``.

    .venv/bin/python benchmarks/bench_roster.py [--rows 1500] [--repeat 3]
        [--backend sqlite postgresql] [--database-url URL]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

from coursehub.catalog import courses
from coursehub.catalog.db import make_engine, session_factory
from coursehub.catalog.roster.apply import apply_roster
from coursehub.catalog.roster.parse import parse_roster
from coursehub.catalog.roster.plan import plan_roster
from coursehub.catalog.schema import upgrade_database

FIRST = [
    "Anaïs",
    "Björn",
    "Chloé",
    "Élodie",
    "François",
    "Gaëlle",
    "Hélène",
    "Inès",
    "Jérôme",
    "Léa",
    "Maël",
    "Noé",
    "Océane",
    "Raphaël",
    "Zoé",
    "Lucas",
    "Hugo",
    "Emma",
    "Jade",
    "Louis",
]
LAST = [
    "Lefèvre",
    "Moreau",
    "N'Diaye",
    "Nguyen",
    "Dupont",
    "Martin",
    "Bernard",
    "Petit",
    "Roux",
    "Fournier",
    "Girard",
    "Bonnet",
    "Müller",
    "García",
    "Lambert",
    "Faure",
    "Rousseau",
]
STEPS = ("parse", "plan", "apply", "total")


def make_roster(n_rows: int, seed: int = 0) -> bytes:
    """Return an Apogée-like export: UTF-8 with BOM, ';', CRLF, French headers, 10 TD groups."""
    rng = random.Random(seed)
    lines = ["N° étudiant;Nom;Prénom;Courriel;Groupe;Date de naissance"]
    for i in range(n_rows):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first.lower()}.{last.lower()}{i}@etu.example.fr".replace("'", "")
        lines.append(f"1250{i:04d};{last};{first};{email};G{i % 10 + 1};2007-0{i % 9 + 1}-15")
    return ("\r\n".join(lines) + "\r\n").encode("utf-8-sig")


def run_once(url: str, data: bytes) -> dict[str, float]:
    """Migrate the empty database at ``url``, add a course, import ``data``; seconds per step."""
    engine = make_engine(url)
    try:
        upgrade_database(engine)
        with session_factory(engine)() as session:
            year = courses.create_year(session, "2025-2026")
            portal = courses.create_portal(session, "L1", "Licence 1")
            course = courses.create_course(session, "INF1001L", "Programmation", year, portal)
            session.commit()
            t0 = time.perf_counter()
            rows = parse_roster(data)
            t1 = time.perf_counter()
            plan = plan_roster(session, course, rows)
            t2 = time.perf_counter()
            apply_roster(session, plan)
            t3 = time.perf_counter()
            count = session.execute(text("SELECT count(*) FROM memberships")).scalar()
            assert count == len(rows), count
    finally:
        engine.dispose()
    return {"parse": t1 - t0, "plan": t2 - t1, "apply": t3 - t2, "total": t3 - t0}


@contextmanager
def sqlite_databases() -> Iterator[Callable[[int], str]]:
    with tempfile.TemporaryDirectory(prefix="bench-roster-") as tmp:
        yield lambda i: f"sqlite:///{Path(tmp) / f'catalog{i}.sqlite'}"


@contextmanager
def postgres_databases(url: str | None) -> Iterator[Callable[[int], str]]:
    if url:
        yield lambda i: _reset_schema(url)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import PostgresServer, _pg_bindir  # the test fixture's throwaway server

    bindir = _pg_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found; give --database-url")
    server = PostgresServer(bindir)
    server.start()
    try:
        server.version = server.execute("SELECT 1")

        def fresh(i: int) -> str:
            server.create_database(f"bench{i}")
            return server.url(f"bench{i}")

        yield fresh
    finally:
        server.stop()


def _reset_schema(url: str) -> str:
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument(
        "--repeat", type=int, default=3, help="fresh databases per backend (median)"
    )
    parser.add_argument("--backend", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--database-url", help="an empty PostgreSQL database to use (it is wiped)")
    args = parser.parse_args()
    data = make_roster(args.rows)
    print(f"roster: {args.rows} rows, {len(data) / 1024:.0f} KiB; median of {args.repeat} runs")
    print(f"{'backend':<12}" + "".join(f"{step + ' (s)':>12}" for step in STEPS))
    for backend in args.backend:
        maker = sqlite_databases() if backend == "sqlite" else postgres_databases(args.database_url)
        with maker as fresh_url:
            runs = [run_once(fresh_url(i), data) for i in range(args.repeat)]
        medians = [statistics.median(run[step] for run in runs) for step in STEPS]
        print(f"{backend:<12}" + "".join(f"{m:>12.3f}" for m in medians))
    return 0


if __name__ == "__main__":
    sys.exit(main())
