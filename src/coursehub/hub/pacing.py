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
:attr:`PacePolicy.target_s`. Whenever the sync's requests have kept the hub
busy for :attr:`PacePolicy.pause_every_s` since the last pause, a pause
(:func:`pause_after`, pure) leaves the event loop free for the requests
queued meanwhile, a login's next request among them; short requests (a group
created) go on back to back until they add up to that much. It also
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
        The pause, in seconds.
    pause_every_s
        Seconds of the sync's requests (their sum since the last pause)
        after which it pauses; 0 pauses after every request.
    first_batch
        Users in the first batch of each kind, before anything was measured.
    max_batch
        Largest batch, whatever the measurements say.
    max_growth
        Largest factor between two successive batch sizes (a request that
        was quick by chance does not make the next one huge).

    The defaults (0.5 s batches, a 20 ms pause after each 0.25 s of
    requests) were measured with ``benchmarks/bench_sync.py --compare 3``:
    first syncs of 3,000 users and 12,000 memberships on a 2-CPU hub while
    a login starts every 250 ms. Logins during the paced sync had a median
    p95 of 0.82 s and max of 1.14 s, against 20.6 s and 22.7 s behind
    unpaced 500-user requests, and the paced sync took 0.905 times as long
    as the unpaced one under the same logins (paired median; 95 % bootstrap
    interval 0.75-1.03).
    """

    target_s: float = 0.5
    pause_s: float = 0.02
    pause_every_s: float = 0.25
    first_batch: int = 8
    max_batch: int = 500
    max_growth: float = 2.0

    def __post_init__(self) -> None:
        if self.target_s <= 0 or self.pause_s < 0 or self.pause_every_s < 0:
            raise ValueError(f"pace: target_s must be > 0, pauses >= 0: {self}")
        if not 1 <= self.first_batch <= self.max_batch or self.max_growth < 1:
            raise ValueError(f"pace: need 1 <= first_batch <= max_batch, max_growth >= 1: {self}")


#: Batches as large as allowed, no pauses: for tests and a hub nobody logs in to.
UNPACED = PacePolicy(target_s=3600.0, pause_s=0.0, first_batch=500)


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


def pause_after(policy: PacePolicy, busy_s: float) -> float:
    """Return the pause, in seconds, once requests took ``busy_s`` since the last pause (pure).

    :attr:`~PacePolicy.pause_s` when ``busy_s`` reached
    :attr:`~PacePolicy.pause_every_s`, 0 before.
    """
    return policy.pause_s if busy_s >= policy.pause_every_s else 0.0


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
        #: seconds of requests since the last pause
        self.busy_s = 0.0
        #: seconds paused in all
        self.paused_s = 0.0

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
        self.busy_s += max(seconds, 0.0)
        pause = pause_after(self.policy, self.busy_s)
        if pause > 0:
            self.busy_s = 0.0
            self.paused_s += pause
            self.stop.wait(pause)  # returns at once when a stop is asked for
