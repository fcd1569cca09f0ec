"""Syncs in the background: one at a time, bursts merged, state visible, nobody kept waiting."""

from __future__ import annotations

import json
import threading

from coursehub.hub.background import BackgroundSync, sync_in_background
from coursehub.hub.reconcile import SyncPlan, SyncReport
from coursehub.hub.sync import SyncOutcome


class Gate:
    """A sync that waits for the test to open it, and notes each scope it ran."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Event()
        self.scopes: list[object] = []

    def __call__(self, course_ids, tracker):
        self.scopes.append(None if course_ids is None else sorted(course_ids))
        tracker.on_plan(SyncPlan(create_users=("a", "b")))
        tracker.progress(1)
        self.entered.set()
        self.open.wait(10)
        return SyncOutcome(tuple(sorted(course_ids or ["all"])), SyncPlan(), SyncReport(3))


def test_edits_made_during_a_sync_are_merged_into_one_next_sync(tmp_path):
    gate = Gate()
    state_path = tmp_path / "hub-sync.json"
    worker = BackgroundSync(gate, state_path)
    first = worker.submit(["c1"])
    assert gate.entered.wait(10)
    second, third = worker.submit(["c2"]), worker.submit(["c3"])
    assert second is third and not first.wait(0.01)
    state = worker.state()
    assert state["phase"] == "running" and state["queued"] and state["scope"] == ["c1"]
    assert (state["done"], state["total"]) == (1, 2)
    assert json.loads(state_path.read_text())["phase"] == "running"
    gate.open.set()
    assert first.wait(10) and third.wait(10)
    assert gate.scopes == [["c1"], ["c2", "c3"]]
    assert third.outcome is not None and third.outcome.course_ids == ("c2", "c3")
    written = json.loads(state_path.read_text())
    assert written["phase"] == "idle" and written["last"]["summary"] == "ok (3 requests)"


def test_the_whole_catalog_absorbs_the_courses_queued_with_it():
    gate = Gate()
    worker = BackgroundSync(gate)
    worker.submit(["c1"])
    assert gate.entered.wait(10)
    worker.submit(["c2"])
    job = worker.submit(None)
    gate.open.set()
    assert job.wait(10) and gate.scopes == [["c1"], None]


def test_a_failing_sync_is_kept_on_its_job_and_the_worker_goes_on():
    calls = []

    def run(course_ids, tracker):
        calls.append(course_ids)
        if len(calls) == 1:
            raise RuntimeError("catalog locked")
        return SyncOutcome((), SyncPlan(), SyncReport())

    worker = BackgroundSync(run)
    failed = worker.submit(None)
    assert failed.wait(10) and failed.outcome is None and "catalog locked" in failed.error
    assert worker.submit(None).wait(10) and worker.state()["last"]["ok"]


def test_a_start_up_banner_does_not_wait_for_a_long_sync(tmp_path, capsys):
    gate = Gate()
    line = sync_in_background(lambda: gate(None, _Tracker()), tmp_path / "s.json", wait_s=0.05)
    assert isinstance(line, str) and line.startswith("running in the background")
    assert str(tmp_path / "s.json") in line
    gate.open.set()
    for _ in range(100):
        if "hub sync: ok" in capsys.readouterr().out:
            break
        threading.Event().wait(0.05)
    else:
        raise AssertionError("the outcome was not printed")


def test_a_start_up_banner_shows_a_quick_sync_outcome():
    report = SyncReport(5)
    assert sync_in_background(lambda: SyncOutcome((), SyncPlan(), report), None) is report


class _Tracker:
    def on_plan(self, plan):
        pass

    def progress(self, items):
        pass
