"""Runner jobs are sampled while they run, into the jobs' usage folder a server names."""

from __future__ import annotations

import textwrap
import time

import pytest

from coursehub.catalog.models.usage import UsageDay, UsageUnit
from coursehub.catalog.usage.ingest import ingest_folder
from coursehub.catalog.usage.rollup import apply_records
from coursehub.meter.journal import USAGE_DIR_VAR, list_journals, read_records
from coursehub.meter.records import UsageRecord
from coursehub.meter.sampler import (
    COURSE_VAR,
    DEFAULT_INTERVAL_S,
    INTERVAL_VAR,
    env_interval_s,
    job_folder,
)
from coursehub.runner.api import submit
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from helpers import wait_until

#: CPU-seconds the job burns before it waits (measured by its own clock).
CPU_COST_S = 1.0

WORK_THEN_WAIT = textwrap.dedent(
    f"""
    import pathlib, sys, time
    start = time.process_time()
    while time.process_time() - start < {CPU_COST_S}:
        pass
    pathlib.Path(sys.argv[1]).write_text("worked")
    while not pathlib.Path(sys.argv[2]).exists():
        time.sleep(0.05)
    """
)


def _records(folder):
    return [r for path in list_journals(folder) for r in read_records(path).records]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5", 5.0),
        ("0.5", 0.5),
        ("", DEFAULT_INTERVAL_S),
        ("0", DEFAULT_INTERVAL_S),
        ("-1", DEFAULT_INTERVAL_S),
        ("nan", DEFAULT_INTERVAL_S),
        ("often", DEFAULT_INTERVAL_S),
    ],
)
def test_the_jobs_sampling_interval_comes_from_the_environment_or_defaults(text, seconds):
    assert env_interval_s({INTERVAL_VAR: text}) == seconds


def test_the_jobs_folder_sits_beside_the_hubs_usage_folder(tmp_path):
    assert job_folder(tmp_path / "usage") == tmp_path / "usage-jobs"


@pytest.mark.slow
def test_a_running_job_is_sampled_before_it_ends_and_closed_in_the_same_unit(
    tmp_path, monkeypatch, session
):
    folder = tmp_path / "usage-jobs"
    monkeypatch.setenv(USAGE_DIR_VAR, str(folder))
    monkeypatch.setenv(INTERVAL_VAR, "0.3")
    monkeypatch.setenv(COURSE_VAR, "gamma-2026")
    script, worked, release = tmp_path / "work.py", tmp_path / "worked", tmp_path / "release"
    script.write_text(WORK_THEN_WAIT)
    backend = LocalBackend(tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False)
    job = submit(str(script), [str(worked), str(release)], backend=backend, name="work")
    wait_until(worked.exists, timeout_s=60, interval_s=0.05, what="the job's work")

    def sampled_after_work() -> list[UsageRecord]:
        return [r for r in _records(folder) if r.event == "sample" and r.cpu_s >= 0.9 * CPU_COST_S]

    samples = wait_until(sampled_after_work, timeout_s=30, interval_s=0.1, what="a sample")
    assert job.state == "running"  # sampled while it runs, not at its end
    release.write_text("")
    result = job.wait(timeout_s=60)
    assert result.returncode == 0

    records = _records(folder)
    assert records[0].event == "open"
    assert records[-1].event == "close"
    assert {r.unit_id for r in records} == {samples[0].unit_id}
    assert {r.course_id for r in records} == {"gamma-2026"}
    assert records[-1].cpu_s == pytest.approx(result.cpu_s)
    assert samples[0].cpu_s <= result.cpu_s + 0.05

    outcome = ingest_folder(session, folder)
    assert outcome.refused == []
    (unit,) = session.query(UsageUnit).all()
    assert (unit.kind, unit.course_id, unit.exit_reason) == ("job", "gamma-2026", "exit 0")
    assert unit.cpu_s == pytest.approx(result.cpu_s)
    assert unit.cpu_s == pytest.approx(CPU_COST_S, rel=0.25)


def test_a_record_naming_another_users_unit_charges_nobody(session):
    now = time.time()
    ada = UsageRecord("sample", "job:host:j1", "job", "ada", "alpha", now, now - 60, cpu_s=10.0)
    assert apply_records(session, [ada]) == 1
    forged = UsageRecord(
        "sample", "job:host:j1", "job", "mallory", "alpha", now + 1, now - 60, cpu_s=5000.0
    )
    as_server = UsageRecord(
        "sample", "job:host:j1", "server", "ada", "alpha", now + 2, now - 60, cpu_s=7000.0
    )
    assert apply_records(session, [forged, as_server]) == 0
    (unit,) = session.query(UsageUnit).all()
    assert (unit.username, unit.cpu_s) == ("ada", 10.0)
    assert {(d.username, d.cpu_s) for d in session.query(UsageDay)} == {("ada", 10.0)}
