"""Logins to a hub started at a steady rate while something else runs, and their latencies.

Used by ``benchmarks/bench_sync.py``: a login (``GET`` then ``POST
/hub/login``) and a load of ``/hub/home`` every 250 ms, as students arrive
at the start of term.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests


class Prober:
    """Start a login (and a load of the hub's home page) every ``period_s``; keep the latencies.

    Open loop: a login starts every ``period_s`` whether or not the previous
    ones have finished (each in a thread of a pool), as students arrive at
    the start of term independently of one another. A prober that waited for
    each login before starting the next would send fewer logins while the
    hub is blocked, and so take less of the hub's time from an unpaced sync
    than from a paced one: the two would not run under the same load.
    """

    def __init__(
        self, url: str, username: str, password: str, period_s: float = 0.25, workers: int = 128
    ) -> None:
        self.url, self.username, self.password, self.period_s = url, username, password, period_s
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.failures = 0
        self.stop = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prober")
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.lock = threading.Lock()

    def __enter__(self) -> Prober:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join()
        self.pool.shutdown(wait=True)  # the logins started are waited for

    def login_once(self) -> float:
        """Log in through the form and load /hub/home; return the seconds it took."""
        t0 = time.perf_counter()
        with requests.Session() as session:
            form = session.get(f"{self.url}/hub/login", timeout=60).text
            xsrf = re.search(r'name="_xsrf"[^>]*value="([^"]+)"', form)
            data = {"username": self.username, "password": self.password}
            data["_xsrf"] = xsrf.group(1) if xsrf else ""
            session.post(f"{self.url}/hub/login", data=data, timeout=60, allow_redirects=False)
            home = session.get(f"{self.url}/hub/home", timeout=60, allow_redirects=False)
            if home.status_code != 200:
                raise RuntimeError(f"/hub/home answered {home.status_code}")
        return time.perf_counter() - t0

    def _one(self, start: float) -> None:
        """One login started at ``start``; its latency counts from then (a queued one too)."""
        try:
            self.login_once()
        except (requests.RequestException, RuntimeError):
            with self.lock:
                self.failures += 1
            return
        with self.lock:
            self.samples.append((start, time.perf_counter() - start))

    def _loop(self) -> None:
        next_start = time.perf_counter()
        while not self.stop.is_set():
            self.pool.submit(self._one, time.perf_counter())
            next_start += self.period_s
            self.stop.wait(max(0.0, next_start - time.perf_counter()))

    def between(self, t0: float, t1: float) -> list[float]:
        with self.lock:
            return [s for start, s in self.samples if t0 <= start < t1]


def percentiles(seconds: list[float]) -> tuple[float, float, float]:
    """Return p50, p95 (nearest rank) and max of ``seconds`` (NaN when empty)."""
    if not seconds:
        return (float("nan"),) * 3
    ranked = sorted(seconds)
    p95 = ranked[min(len(ranked) - 1, max(0, round(0.95 * len(ranked)) - 1))]
    return statistics.median(ranked), p95, ranked[-1]


def latency_line(label: str, seconds: list[float]) -> str:
    """Return p50/p95/max of ``seconds`` as one line."""
    if not seconds:
        return f"{label:30s} no sample"
    p50, p95, top = percentiles(seconds)
    return (
        f"{label:30s} p50 {p50:.3f} s, p95 {p95:.3f} s, max {top:.3f} s over {len(seconds)} logins"
    )
