"""A usage record claims only what its unit could have used on the host, at a time that was."""

from __future__ import annotations

import re

import pytest

from coursehub.meter.bounds import (
    CLOCK_SKEW_S,
    WALL_SLACK_S,
    HostLimits,
    bounds_problem,
    host_limits,
    time_problem,
)
from coursehub.meter.records import RecordError, UsageRecord, parse_record, render_record

NOW = 1_800_000_000.0
GiB = 2**30
#: A host of 4 CPUs, 16 GiB, 2 GPUs of 80 GiB each.
HOST = HostLimits(cpus=4, mem_bytes=16 * GiB, gpus=2, gpu_mem_bytes=160 * GiB)


def job(**fields: object) -> UsageRecord:
    """A job of one hour (ending 10 s ago) using a quarter of the host, with ``fields`` changed."""
    values: dict[str, object] = {
        "event": "close",
        "unit_id": "job:h:1",
        "kind": "job",
        "user": "ada",
        "course_id": "alpha",
        "at": NOW - 10,
        "started_at": NOW - 3610,
        "cpu_s": 3600.0,
        "mem_peak_bytes": GiB,
        "gpu_s": 0.0,
        "gpu_peak_bytes": 0,
    }
    values.update(fields)
    return UsageRecord(**values)  # type: ignore[arg-type]


def test_a_job_within_the_hosts_size_fits():
    assert bounds_problem(job(), HOST, NOW) is None
    assert bounds_problem(job(cpu_s=4 * 3600.0, gpu_s=2 * 3600.0), HOST, NOW) is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cpu_s": 3.6e9}, r"cpu_s 3.6e\+09 is more than 3602 s of wall time x 4 CPUs"),
        ({"cpu_s": 4 * (3600 + WALL_SLACK_S) + 1}, "x 4 CPUs"),
        ({"gpu_s": 3.6e8}, "x 2 GPUs"),
        ({"mem_peak_bytes": 17 * GiB}, "more than the host's"),
        ({"gpu_peak_bytes": 161 * GiB}, "more than the GPUs'"),
        ({"at": NOW + CLOCK_SKEW_S + 60, "started_at": NOW}, "lies in the future"),
        ({"started_at": NOW + 1}, "before its unit's start"),
        ({"cpu_s": float("nan")}, "finite and not negative"),
        ({"gpu_s": float("inf")}, "finite and not negative"),
        ({"cpu_s": -1.0}, "finite and not negative"),
        ({"mem_peak_bytes": -1}, "must not be negative"),
        ({"started_at": 0.0, "cpu_s": 1.0}, "a unit of 20833 days, more than 31"),
    ],
)
def test_a_record_beyond_the_host_or_the_clock_is_refused_with_the_bound(fields, message):
    problem = bounds_problem(job(**fields), HOST, NOW)
    assert problem is not None and re.search(message, problem), problem


def test_a_host_without_gpus_allows_no_gpu_seconds_nor_gpu_memory():
    bare = HostLimits(cpus=2, mem_bytes=8 * GiB)
    assert "x 0 GPUs" in (bounds_problem(job(gpu_s=1.0), bare, NOW) or "")
    assert "GPUs'" in (bounds_problem(job(gpu_peak_bytes=1), bare, NOW) or "")


def test_the_records_own_cpu_limit_narrows_the_cpu_bound():
    assert bounds_problem(job(cpu_s=7200.0), HOST, NOW) is None
    assert "x 1 CPUs" in (bounds_problem(job(cpu_s=7200.0, cpu_limit=1.0), HOST, NOW) or "")
    # a limit above the host's is no licence for more
    assert "x 4 CPUs" in (bounds_problem(job(cpu_s=5 * 3700.0, cpu_limit=64.0), HOST, NOW) or "")


def test_a_later_record_cannot_move_its_units_start_back_to_claim_more():
    early = job(started_at=NOW - 10 * 3600, cpu_s=4 * 9 * 3600.0)  # claims ten hours
    assert bounds_problem(early, HOST, NOW) is None  # on its own it fits
    problem = bounds_problem(early, HOST, NOW, started_at=NOW - 3610)  # the unit began 1 h ago
    assert problem is not None and "x 4 CPUs" in problem


def test_the_time_checks_alone_let_any_counter_pass():
    assert time_problem(job(cpu_s=3.6e9), NOW) is None
    assert "future" in (time_problem(job(at=NOW + 3600), NOW) or "")


def test_this_hosts_limits_are_read_and_a_given_value_wins():
    here = host_limits(gpus=0, gpu_mem_bytes=0)
    assert here.cpus >= 1 and here.mem_bytes > 2**20 and here.gpus == 0
    assert host_limits(cpus=64, mem_bytes=GiB, gpus=8, gpu_mem_bytes=0) == HostLimits(64, GiB, 8, 0)


def test_a_line_without_a_time_is_refused_not_a_crash():
    line = render_record(job()).replace('"at": ', '"when": ')
    with pytest.raises(RecordError, match="missing field 'at'"):
        parse_record(line)


def test_a_record_without_a_cpu_limit_still_parses():
    line = render_record(job()).replace(', "cpu_limit": 0.0', "")
    assert '"cpu_limit"' not in line
    assert parse_record(line) == job()
