"""Course page latency: a course of 1,500 students under 20 concurrent clients.

The app runs in development mode as the course's lead (who sees the
student table, 50 a page), served by ``coursehub web serve`` in a subprocess
on a free localhost port, by default in the recommended production setting
(``--workers auto``: one gunicorn process per usable CPU, ``--threads``
threads each; ``--workers 1`` is waitress in one process). Clients are
threads with a ``requests.Session`` each, sending a fixed number of requests.
Prints p50/p95/max latency, requests/s and the server's CPU time per request
(all its processes), per backend: SQLite, and PostgreSQL when
``initdb``/``pg_ctl`` are found (a throwaway cluster). Target: p95 < 150 ms.
The clients run on the same machine as the server and take their share of
its CPUs; the load average before each run is printed, since other work on
the machine changes the figures.

    .venv/bin/python benchmarks/bench_web.py [--students 1500] [--clients 20] [--requests 400]
        [--workers auto] [--threads 4] [--backend both]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import requests

from coursehub.catalog.courses import get_course
from coursehub.catalog.db import make_engine, session_scope
from coursehub.catalog.schema import upgrade_database
from coursehub.demo.ports import free_port
from coursehub.web.testing import add_students, seed_web_catalog


def build_catalog(url: str, n_students: int) -> str:
    """Migrate and seed ``url``, then enrol ``n_students`` more; return the course id."""
    engine = make_engine(url)
    upgrade_database(engine)
    engine.dispose()
    course_id = seed_web_catalog(url)
    engine = make_engine(url)
    with session_scope(engine) as session:
        add_students(session, get_course(session, course_id), n_students)
    engine.dispose()
    return course_id


@contextmanager
def serve(url: str, workers: str, threads: int) -> Iterator[tuple[str, psutil.Process]]:
    """Run ``coursehub web serve`` as the course's lead in a subprocess; yield (URL, process).

    A separate process, so that the clients do not share the server's GIL.
    """
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "coursehub",
        "web",
        "serve",
        "--port",
        str(port),
        "--workers",
        workers,
        "--threads",
        str(threads),
        "--dev-user",
        "mbuffat",
    ]
    env = {**os.environ, "COURSEHUB_DATABASE_URL": url}
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(base + "/static/coursehub.css", timeout=5).raise_for_status()
                break
            except requests.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    out = server.stdout.read().decode() if server.stdout else ""
                    raise RuntimeError(f"the server did not start:\n{out}") from None
                time.sleep(0.2)
        yield base, psutil.Process(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_clients(url: str, n_clients: int, n_requests: int) -> tuple[list[float], float]:
    """Send ``n_requests`` GETs of ``url`` from ``n_clients`` threads; return latencies, wall_s."""
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = [n_requests // n_clients + (i < n_requests % n_clients) for i in range(n_clients)]

    def client(count: int) -> None:
        with requests.Session() as http:
            mine = []
            for _ in range(count):
                start = time.perf_counter()
                response = http.get(url, timeout=60)
                mine.append(time.perf_counter() - start)
                response.raise_for_status()
            with lock:
                latencies.extend(mine)

    workers = [threading.Thread(target=client, args=(count,)) for count in per_client]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return latencies, time.perf_counter() - start


def cpu_s(server: psutil.Process) -> float:
    """Return the user + system CPU seconds used so far by ``server`` and its children."""
    total = 0.0
    for proc in [server, *server.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def report(name: str, latencies: list[float], wall_s: float, size: int, cpu: float) -> None:
    """Print one backend's figures (``cpu``: server CPU seconds spent on the measured requests)."""
    ms = sorted(x * 1000 for x in latencies)
    p95 = ms[max(0, round(0.95 * len(ms)) - 1)]
    print(
        f"{name:10s} n={len(ms)} page={size / 1024:.0f} KiB  p50={statistics.median(ms):.1f} ms  "
        f"p95={p95:.1f} ms  max={ms[-1]:.1f} ms  {len(ms) / wall_s:.1f} req/s  "
        f"server CPU {cpu / len(ms) * 1000:.1f} ms/request  "
        f"target p95<150 ms: {'met' if p95 < 150 else 'NOT met'}",
        flush=True,
    )


def bench(name: str, url: str, args: argparse.Namespace) -> None:
    """Build, serve, warm up, measure, report one backend."""
    course_id = build_catalog(url, args.students)
    with serve(url, args.workers, args.threads) as (base, server):
        page = f"{base}/courses/{course_id}/"
        first = requests.get(page, timeout=60)
        first.raise_for_status()
        assert f"Students ({args.students + 4})" in first.text, "the page misses the students"
        run_clients(page, args.clients, 2 * args.clients)  # warm-up: every worker and thread
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{name}: load average {load} on {os.cpu_count()} CPUs", flush=True)
        cpu_before = cpu_s(server)
        latencies, wall_s = run_clients(page, args.clients, args.requests)
        cpu = cpu_s(server) - cpu_before
    report(name, latencies, wall_s, len(first.content), cpu)


def pg_bindir() -> Path | None:
    """Return Debian's PostgreSQL binaries directory, if installed."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


@contextmanager
def postgres(bindir: Path) -> Iterator[str]:
    """Start a throwaway PostgreSQL cluster on a Unix socket; yield a database URL."""
    root = Path(tempfile.mkdtemp(prefix="bench-web-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        import pwd

        entry = pwd.getpwnam("postgres")
        os.chown(root, entry.pw_uid, entry.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, timeout=120)

    data = str(root / "data")
    run(str(bindir / "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync")
    options = f"-k {root} -c listen_addresses='' -c fsync=off -c max_connections=100"
    run(str(bindir / "pg_ctl"), "-D", data, "-l", str(root / "log"), "-o", options, "-w", "start")
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={root}"
    finally:
        run(str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Parse arguments and run the benchmark on each available backend."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=1500)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument(
        "--workers", default="auto", help="server processes: 'auto' (one per CPU), N, 1: waitress"
    )
    parser.add_argument("--threads", type=int, default=4, help="server threads per process")
    parser.add_argument("--backend", choices=["both", "sqlite", "postgresql"], default="both")
    args = parser.parse_args()
    print(f"coursehub web serve --workers {args.workers} --threads {args.threads}", flush=True)
    if args.backend != "postgresql":
        with tempfile.TemporaryDirectory() as tmp:
            bench("sqlite", f"sqlite:///{tmp}/catalog.sqlite", args)
    if args.backend == "sqlite":
        return
    bindir = pg_bindir()
    if bindir is None:
        print("postgresql skipped: initdb/pg_ctl not found")
        return
    with postgres(bindir) as url:
        bench("postgresql", url, args)


if __name__ == "__main__":
    main()
