"""Students by name in Python: the cost of one course page's student list, cold and warm.

The course page reads every student of the course in one query and sorts
them with the Unicode Collation Algorithm (``coursehub.catalog.readmodel``),
then shows one page. This prints, for a course of ``--students`` students with
French-like names on a throwaway SQLite catalog, the median and the min-max
over ``--repeats`` runs of:

- ``query``: the students' query and rows alone (no sort);
- ``cold``: query and sort with an empty collation-key cache (a new process);
- ``warm``: query and sort with the keys cached (every later request).

    .venv/bin/python benchmarks/bench_name_order.py [--students 3000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import insert, select

from coursehub.catalog import readmodel
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.models.courses import Membership, Person, Role
from coursehub.catalog.schema import upgrade_database
from coursehub.web.testing import seed_web_catalog

LAST = ["Çelik", "Dupont", "Lefèvre", "Émond", "Øberg", "Zola", "N'Diaye", "Moreau", "Œuvray"]
FIRST = ["Anaïs", "Émile", "Chloé", "Björn", "Zoé", "Ilyès", "Noël", "Hélène", "Ayşe", "Jean"]


def enrol(session, course_pk: int, n_students: int, rng: random.Random) -> None:
    """Bulk-insert ``n_students`` students with names drawn from :data:`LAST` and :data:`FIRST`."""
    people = [
        {
            "username": f"b{i:07d}",
            "first_name": rng.choice(FIRST),
            # mostly distinct last names: the cold cache computes a key for almost every one
            "last_name": rng.choice(LAST) + "".join(rng.choices("aeiouéèçlmnrst", k=5)),
            "student_number": f"b{i:07d}",
        }
        for i in range(n_students)
    ]
    session.execute(insert(Person), people)
    pks = session.scalars(select(Person.id).where(Person.username.like("b%")))
    rows = [{"person_pk": pk, "course_pk": course_pk, "role": Role.STUDENT.value} for pk in pks]
    session.execute(insert(Membership), rows)


def timed(run: Callable[[], object], repeats: int, before: Callable[[], None]) -> list[float]:
    """Return the seconds of ``repeats`` runs of ``run``, each after ``before()``."""
    times = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'catalog.sqlite'}"
        engine = make_engine(url)
        upgrade_database(engine)
        engine.dispose()
        course_id = seed_web_catalog(url)
        engine = make_engine(url)
        with session_scope(engine) as session:
            course = readmodel.load_course(session, course_id)
            enrol(session, course.id, args.students, random.Random(1))
        with session_scope(engine) as session:
            course = readmodel.load_course(session, course_id)
            readmodel.cached_name_key("warm up pyuca")  # loads DUCET once, as a process does

            def query() -> object:
                found = session.execute(readmodel.STUDENTS_QUERY, {"course_pk": course.id})
                return [readmodel._member(r, {}) for r in found]

            def page() -> object:
                return readmodel.load_students(session, course, {}, page=1)

            figures = {
                "query": timed(query, args.repeats, lambda: None),
                "cold": timed(page, args.repeats, readmodel.cached_name_key.cache_clear),
                "warm": timed(page, args.repeats, lambda: None),
            }
        engine.dispose()
    n = args.students + 4  # the demo course's own students
    print(f"{n} students, {args.repeats} runs each (ms: median [min-max])")
    for name, times in figures.items():
        ms = [t * 1000 for t in times]
        print(f"  {name:5s} {statistics.median(ms):7.1f} [{min(ms):.1f}-{max(ms):.1f}]")


if __name__ == "__main__":
    main()
