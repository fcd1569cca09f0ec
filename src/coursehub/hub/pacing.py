"""Pace the sync's writes so that the hub keeps answering logins: batch sizes follow measured time.

JupyterHub serves every request on one Tornado event loop, and its REST
handlers that create users (``POST /users``) or change group members
(``POST``/``DELETE /groups/{name}/users``) run without yielding to it: they
look each user up and commit, user by user (``jupyterhub/apihandlers/users.py``,
``groups.py``, JupyterHub 6.x). While one such request runs, every other
request waits, logins included. ``benchmarks/bench_sync.py`` measured about
15 ms per user created and 3 ms per membership added on a 2-CPU test hub,
so a 500-user request blocks the hub for seconds.

The :class:`Pacer` therefore sends a list of users in batches whose size
follows the time the hub took for the previous batch of the same kind
(:func:`next_batch_size`, pure): each request aims at
:attr:`PacePolicy.target_s`, and a pause after it (:func:`pause_after`, pure)
leaves the event loop free for the requests queued meanwhile. It also
counts progress and stops between two requests when asked (:class:`SyncStoppedError`),
so that a long sync can be interrupted at a safe point and run again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class SyncStoppedError(Exception):
    """Raised by :meth:`Pacer.check` between two requests once a stop was asked for."""


@dataclass(frozen=True)
class PacePolicy:
    """How hard the sync may load the hub.

    Attributes
    ----------
    target_s
        Seconds one batched request should take (the longest a login waits
        behind it).
    pause_s
        Longest pause after a request, in seconds.
    pause_ratio
        Pause after a request as a fraction of its duration (at most ``pause_s``).

    The defaults (0.5 s batches, pauses of at most 20 ms) were chosen with
    ``benchmarks/bench_sync.py`` (a first sync of 3,000 users and 12,000
    memberships on a 2-CPU hub, a prober logging in every 250 ms): logins
    during the sync had p95 0.52 s and max 0.72-0.85 s, and the sync took
    1.2 times as long as unpaced 500-user requests (70.7 and 74.6 s against
    58.7 and 61.7 s), whose logins waited up to 10 s. 0.25 s batches with
    pauses up to 0.1 s gave a p95 of 0.25 s but a sync 1.6 times as long.
    first_batch
        Users in the first batch of each kind, before anything was measured.
    max_batch
        Largest batch, whatever the measurements say.
    max_growth
        Largest factor between two successive batch sizes (a request that
        was quick by chance does not make the next one huge).
    """

    target_s: float = 0.5
    pause_s: float = 0.02
    pause_ratio: float = 0.4
    first_batch: int = 8
    max_batch: int = 500
    max_growth: float = 2.0

    def __post_init__(self) -> None:
        if self.target_s <= 0 or self.pause_s < 0 or self.pause_ratio < 0:
            raise ValueError(f"pace: target_s must be > 0, pauses >= 0: {self}")
        if not 1 <= self.first_batch <= self.max_batch or self.max_growth < 1:
            raise ValueError(f"pace: need 1 <= first_batch <= max_batch, max_growth >= 1: {self}")


#: Batches as large as allowed, no pauses: for tests and a hub nobody logs in to.
UNPACED = PacePolicy(target_s=3600.0, pause_s=0.0, pause_ratio=0.0, first_batch=500)


def next_batch_size(policy: PacePolicy, size: int, seconds: float) -> int:
    """Return the next batch size after a batch of ``size`` items took ``seconds`` (pure).

    The size that would take :attr:`~PacePolicy.target_s` at the measured
    seconds per item, at most ``max_growth`` times ``size`` and within
    ``[1, max_batch]``. A batch that took no measurable time grows by ``max_growth``.
    """
    grown = max(1, int(size * policy.max_growth))
    if seconds <= 0:
        return min(policy.max_batch, grown)
    ideal = int(policy.target_s * size / seconds + 1e-9)  # 9.999... is 10
    return max(1, min(policy.max_batch, grown, ideal))


def pause_after(policy: PacePolicy, seconds: float) -> float:
    """Return the pause, in seconds, after a request that took ``seconds`` (pure)."""
    return min(policy.pause_s, policy.pause_ratio * max(seconds, 0.0))


class Pacer:
    """Send the writes of one sync: batches sized by measurement, pauses, progress and stop.

    Parameters
    ----------
    policy
        Batch sizes and pauses (default :class:`PacePolicy`).
    stop
        Set it (from a signal handler or another thread) to stop before the
        next request: :meth:`check` then raises :class:`SyncStoppedError`.
    progress
        Called with the number of items (users, memberships, groups) each
        request carried out.
    clock
        Monotonic seconds (tests may pass their own).
    """

    def __init__(
        self,
        policy: PacePolicy | None = None,
        stop: threading.Event | None = None,
        progress: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy or PacePolicy()
        self.stop = stop or threading.Event()
        self.progress = progress
        self.clock = clock
        self.sizes: dict[str, int] = {}
        #: seconds of the longest request sent
        self.longest_s = 0.0

    def check(self) -> None:
        """Raise :class:`SyncStoppedError` if a stop was asked for."""
        if self.stop.is_set():
            raise SyncStoppedError("stopped on request")

    def batches(self, kind: str, items: Sequence[T]) -> Iterator[Sequence[T]]:
        """Yield ``items`` in batches; the time until the next ``next()`` sizes the following one.

        The caller sends each batch before asking for the next; the pause
        and the progress count come after it. Raises :class:`SyncStoppedError`
        before a batch when a stop was asked for.
        """
        start = 0
        while start < len(items):
            self.check()
            size = self.sizes.get(kind, self.policy.first_batch)
            batch = items[start : start + size]
            t0 = self.clock()
            yield batch
            seconds = self.clock() - t0
            self.sizes[kind] = next_batch_size(self.policy, len(batch), seconds)
            start += len(batch)
            self._after(len(batch), seconds)

    def one(self, action: Callable[[], T], items: int = 1) -> T:
        """Send one request (``action``), then pause and count ``items`` done."""
        self.check()
        t0 = self.clock()
        try:
            return action()
        finally:
            self._after(items, self.clock() - t0)

    def count(self, items: int) -> None:
        """Count ``items`` done by a request sent within a batch (see :meth:`batches`)."""
        if self.progress is not None and items:
            self.progress(items)

    def _after(self, items: int, seconds: float) -> None:
        self.longest_s = max(self.longest_s, seconds)
        self.count(items)
        pause = pause_after(self.policy, seconds)
        if pause > 0:
            self.stop.wait(pause)  # returns at once when a stop is asked for
