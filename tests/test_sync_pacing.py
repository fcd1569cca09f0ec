"""Pacing of the sync's writes: batch sizes from measured time, pauses, progress and stop."""

import threading

import pytest

from coursehub.hub.pacing import (
    PacePolicy,
    Pacer,
    SyncStoppedError,
    next_batch_size,
    pause_after,
)

POLICY = PacePolicy(target_s=0.25, pause_s=0.1, pause_every_s=0.2, first_batch=8, max_batch=500)


@pytest.mark.parametrize(
    ("size", "seconds", "expected"),
    [
        (8, 0.125, 16),  # half the target: twice as many
        (100, 0.5, 50),  # twice the target: half as many
        (8, 0.01, 16),  # far below the target: growth bounded by max_growth
        (400, 0.01, 500),  # ... and by max_batch
        (10, 30.0, 1),  # a very slow hub: one user per request
        (8, 0.0, 16),  # nothing measurable: grow
        (500, 0.25, 500),  # on target: keep
    ],
)
def test_the_next_batch_aims_at_the_target_time(size, seconds, expected):
    assert next_batch_size(POLICY, size, seconds) == expected


@pytest.mark.parametrize(
    ("busy_s", "expected"), [(0.25, 0.1), (0.2, 0.1), (0.05, 0.0), (0.0, 0.0), (3.0, 0.1)]
)
def test_a_pause_comes_once_the_requests_add_up_to_pause_every_s(busy_s, expected):
    assert pause_after(POLICY, busy_s) == pytest.approx(expected)


def test_short_requests_go_back_to_back_until_they_add_up(monkeypatch):
    clock = FakeClock()
    pacer = Pacer(PacePolicy(pause_s=0.01, pause_every_s=0.25), clock=clock)
    waits = []
    monkeypatch.setattr(pacer.stop, "wait", waits.append)

    def request(seconds):
        clock.now += seconds

    for _ in range(10):  # ten 1/16 s requests: a pause after the 4th and the 8th
        pacer.one(lambda: request(0.0625))
    pacer.one(lambda: request(0.375))  # 0.125 s pending + 0.375 s: a pause
    assert waits == [0.01, 0.01, 0.01] and pacer.paused_s == pytest.approx(0.03)
    assert pacer.busy_s == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        {"target_s": 0},
        {"pause_s": -1},
        {"pause_every_s": -0.1},
        {"first_batch": 0},
        {"first_batch": 600, "max_batch": 500},
        {"max_growth": 0.5},
    ],
)
def test_a_policy_that_cannot_work_is_refused(bad):
    with pytest.raises(ValueError, match="pace"):
        PacePolicy(**bad)


class FakeClock:
    """A clock that only moves when the test says how long a request took."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_batches_follow_the_time_each_one_took():
    clock = FakeClock()
    done = []
    policy = PacePolicy(target_s=0.25, pause_s=0.0, first_batch=4)
    pacer = Pacer(policy, progress=done.append, clock=clock)
    sizes = []
    for batch in pacer.batches("create_users", list(range(100))):
        sizes.append(len(batch))
        clock.now += 0.025 * len(batch)  # the hub takes 25 ms per user: 10 per 0.25 s
    assert sizes[:4] == [4, 8, 10, 10] and sum(sizes) == 100
    assert sum(done) == 100 and pacer.longest_s == pytest.approx(0.25)


def test_each_kind_of_write_has_its_own_batch_size():
    clock = FakeClock()
    pacer = Pacer(PacePolicy(target_s=0.25, pause_s=0.0, first_batch=10), clock=clock)
    for _batch in pacer.batches("create_users", list(range(10))):
        clock.now += 0.5
    for _batch in pacer.batches("add_members", list(range(10))):
        clock.now += 0.01
    assert pacer.sizes == {"create_users": 5, "add_members": 20}


def test_a_stop_ends_the_batches_before_the_next_request():
    stop = threading.Event()
    pacer = Pacer(PacePolicy(pause_s=0.0, first_batch=2, max_batch=2), stop=stop)
    sent = []
    with pytest.raises(SyncStoppedError):
        for batch in pacer.batches("create_users", list(range(10))):
            sent.extend(batch)
            if len(sent) == 4:
                stop.set()
    assert sent == [0, 1, 2, 3]
    with pytest.raises(SyncStoppedError):
        pacer.one(lambda: sent.append("never"))
    assert "never" not in sent


def test_a_stop_cuts_the_pause_short():
    stop = threading.Event()
    pacer = Pacer(PacePolicy(pause_s=60.0, pause_every_s=0.0), stop=stop)
    timer = threading.Timer(0.05, stop.set)
    timer.start()
    pacer.one(lambda: None)  # would pause 60 s without the stop
    timer.join()
    assert stop.is_set()
