"""The contention benchmark's pure parts: plan, workload output, figures, table, GPU decisions."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from coursehub.bench.cli import add_arguments, parse_seed
from coursehub.bench.contention import plan_cpu_weight, plan_order
from coursehub.bench.gpu import ExitSample, judge_release, plan_gpu_check
from coursehub.bench.naive import plan_naive_env
from coursehub.bench.report import (
    render_header,
    render_spread,
    render_table,
    render_targets,
    render_waits,
    save_plot,
)
from coursehub.bench.scenarios import (
    Scenario,
    ScenarioResult,
    StudentResult,
    check_cpu_limit,
    parse_modes,
    parse_users,
    plan_scenarios,
)
from coursehub.bench.stats import (
    bootstrap_median_interval,
    describe_median,
    describe_spread,
    summarise_slowdowns,
)
from coursehub.bench.students import BenchSettings, plan_workload_args
from coursehub.bench.summary import (
    Row,
    Target,
    check_baseline,
    check_targets,
    ideal_makespan,
    merge_repeats,
    pair_with_baseline,
    plan_rows,
)
from coursehub.bench.workload import (
    WorkloadReport,
    count_migrations,
    parse_workload_output,
    render_result_line,
    run_queue_wait_s,
)
from coursehub.errors import CoursehubError, UsageError
from coursehub.resources.gpus import GpuInfo
from helpers import assert_matches_golden

# --- plan ------------------------------------------------------------------


def test_parse_users_sorts_and_dedupes():
    assert parse_users("4, 1,2,1") == (1, 2, 4)


@pytest.mark.parametrize("text", ["0", "1,0", "-2", "two", "", "1,,2", "1.5"])
def test_parse_users_rejects_non_positive_or_non_integers(text):
    with pytest.raises(UsageError, match="--users"):
        parse_users(text)


def test_parse_modes_keeps_order_and_rejects_unknown():
    assert parse_modes("overcommit, naive,overcommit") == ("overcommit", "naive")
    with pytest.raises(UsageError, match="unknown mode 'fast'"):
        parse_modes("naive,fast")


@pytest.mark.parametrize(("cpu_limit", "threads"), [(1.0, 1), (0.5, 1), (2.0, 2), (1.9, 1)])
def test_check_cpu_limit_gives_floor_threads(cpu_limit, threads):
    assert check_cpu_limit(cpu_limit, cpu_budget=2) == threads


@pytest.mark.parametrize("cpu_limit", [0.0, -1.0, math.nan, math.inf, 3.0])
def test_check_cpu_limit_rejects_bad_or_too_large(cpu_limit):
    with pytest.raises(UsageError, match="--cpu-limit"):
        check_cpu_limit(cpu_limit, cpu_budget=2)


def test_plan_scenarios_puts_the_baseline_first_once():
    plan = plan_scenarios((1, 2), ("naive", "managed", "overcommit"), 1.0, 1)
    labels = [s.label for s in plan]
    assert labels == [
        "managed x1",
        "naive x1",
        "naive x2",
        "managed x2",
        "overcommit x1",
        "overcommit x2",
    ]
    assert plan[0].is_baseline
    assert [s.n_threads for s in plan if s.mode == "naive"] == [None, None]
    assert {s.n_threads for s in plan if s.mode != "naive"} == {1}


def test_plan_scenarios_adds_the_baseline_when_not_asked_for():
    plan = plan_scenarios((4,), ("overcommit",), 1.0, 1)
    assert [s.label for s in plan] == ["managed x1", "overcommit x4"]


# --- naive environment and workload arguments --------------------------------


def test_naive_env_strips_every_thread_setting_and_keeps_the_rest():
    base = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "OMP_NUM_THREADS": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        "OMP_PROC_BIND": "true",
        "GOMP_SPINCOUNT": "0",
        "KMP_BLOCKTIME": "0",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "TF_NUM_INTEROP_THREADS": "1",
        "PYTHON_CPU_COUNT": "1",
        "COURSEHUB_N_THREADS": "1",
        "COURSEHUB_CGROUP_PROCS": "/x",
        "COURSEHUB_RUNS_DIR": "/runs",
    }
    snapshot = dict(base)
    env = plan_naive_env(base)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "COURSEHUB_RUNS_DIR": "/runs",
        "PYTHONUNBUFFERED": "1",
    }
    assert base == snapshot


def test_workload_args_follow_the_settings():
    settings = BenchSettings((), steps=7, batch_size=16, device="cuda")
    assert plan_workload_args(Path("/d/data.npz"), settings) == [
        "--data",
        "/d/data.npz",
        "--steps",
        "7",
        "--batch-size",
        "16",
        "--device",
        "cuda",
    ]


@pytest.mark.parametrize(
    ("version", "shares", "expect"),
    [
        (1, 4096, ("cpu.shares", "4096")),
        (1, 10**9, ("cpu.shares", "262144")),
        (1, 1, ("cpu.shares", "2")),
        (2, 1024, ("cpu.weight", "39")),
        (2, 262144, ("cpu.weight", "10000")),
        (2, 2, ("cpu.weight", "1")),
    ],
)
def test_cpu_weight_in_v1_and_v2_units(version, shares, expect):
    assert plan_cpu_weight(version, shares) == expect


# --- workload output ---------------------------------------------------------


def test_result_line_round_trips_and_the_last_one_wins():
    first = WorkloadReport(1.0, 0.9, 2, 5, 0.5)
    last = WorkloadReport(8.12345, 16.2, 1, 1000, 0.031, "cpu")
    text = "\n".join(["noise", render_result_line(first), "more", render_result_line(last), ""])
    assert parse_workload_output(text) == WorkloadReport(8.1235, 16.2, 1, 1000, 0.031, "cpu")


def test_result_line_carries_preemptions_and_migrations_when_known():
    report = WorkloadReport(3.0, 2.9, 1, 10, 0.1, "cpu", preempted=41, migrations=2)
    assert parse_workload_output(render_result_line(report)) == report
    old = (
        'coursehub-bench-workload {"train_s": 1, "cpu_s": 1, "torch_threads": 1, "steps": 1, '
        '"final_loss": 0.5}'
    )
    assert (parse_workload_output(old).preempted, parse_workload_output(old).migrations) == (
        None,
        None,
    )


def test_migrations_are_summed_over_the_threads(tmp_path):
    for tid, count in (("100", 3), ("101", 4)):
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "sched").write_text(
            f"python (100, #threads: 2)\nse.exec_start : 1.0\nse.nr_migrations : {count}\n"
        )
    (tmp_path / "102").mkdir()  # a thread that ended: no sched file
    assert count_migrations(tmp_path) == 7
    assert count_migrations(tmp_path / "missing") is None


def test_run_queue_waits_are_summed_over_the_threads_in_seconds(tmp_path):
    # /proc/<pid>/task/<tid>/schedstat: on-CPU ns, run-queue wait ns, timeslices
    for tid, text in (("100", "9000000000 250000000 40\n"), ("101", "10 1750000000 3\n")):
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(text)
    (tmp_path / "102").mkdir()  # a thread that ended: no schedstat
    (tmp_path / "103").mkdir()
    (tmp_path / "103" / "schedstat").write_text("garbled\n")
    assert run_queue_wait_s(tmp_path) == 2.0
    assert run_queue_wait_s(tmp_path / "missing") is None


def test_this_process_shows_its_run_queue_wait():
    waited = run_queue_wait_s()
    assert waited is not None and waited >= 0.0


def test_result_line_carries_the_run_queue_wait():
    report = WorkloadReport(3.0, 2.9, 2, 10, 0.1, "cpu", waited_s=0.1234)
    assert parse_workload_output(render_result_line(report)) == report


def test_result_line_is_read_among_runner_lines():
    text = (
        'coursehub-bench-workload {"train_s": 3.5, "cpu_s": 7.0, "torch_threads": 2, '
        '"steps": 10, "final_loss": 0.25, "device": "cpu"}\n'
        "[coursehub] exit 0 | elapsed 5.1 s | CPU 7.3 s | 1 thread | peak RSS 300.0 MiB\n"
    )
    report = parse_workload_output(text)
    assert (report.train_s, report.cpu_s, report.torch_threads, report.steps) == (3.5, 7.0, 2, 10)


def test_missing_result_line_names_the_last_output():
    with pytest.raises(CoursehubError, match=r"no result line.*Killed"):
        parse_workload_output("loading\nTraceback\nKilled\n")


def test_malformed_result_line_is_an_error():
    with pytest.raises(CoursehubError, match="malformed"):
        parse_workload_output('coursehub-bench-workload {"train_s": "x"}')


# --- figures -----------------------------------------------------------------


def student(train_s, *, wall_s=None, end_s=None, throttled=0, threads=1, rc=0, enforcement=None):
    return StudentResult(
        returncode=rc,
        wall_s=wall_s or (train_s or 0) + 2,
        queued_s=0.0,
        end_s=end_s or (train_s or 0) + 2,
        train_s=train_s,
        cpu_s=None if train_s is None else train_s * threads,
        torch_threads=threads,
        process_cpu_s=1.0,
        nr_throttled=throttled,
        throttled_s=0.0,
        enforcement=enforcement or "cgroup v1",
    )


def scenario_result(mode, students, makespan_s, n_threads=1):
    scenario = Scenario(mode, len(students), 1.0, None if mode == "naive" else n_threads)
    return ScenarioResult(scenario, tuple(students), makespan_s)


def sample_results():
    return [
        scenario_result("managed", [student(8.0)], 10.0),
        scenario_result(
            "naive",
            [student(30.0, threads=2, throttled=300), student(50.0, threads=2, throttled=500)],
            53.0,
        ),
        scenario_result("managed", [student(8.0), student(8.6)], 11.0),
        scenario_result("overcommit", [student(8.0, throttled=1) for _ in range(4)], 21.0),
    ]


def test_ideal_makespan_is_total_work_over_cpus_but_never_below_one_job():
    assert ideal_makespan(10.0, 4, 1, 2) == 20.0
    assert ideal_makespan(10.0, 1, 1, 2) == 10.0
    assert ideal_makespan(10.0, 3, 2, 2) == 30.0


def test_rows_measure_slowdown_against_one_managed_student():
    rows = plan_rows(sample_results(), cpu_budget=2)
    by_label = {(r.mode, r.n_students): r for r in rows}
    naive = by_label["naive", 2]
    assert naive.slowdown == pytest.approx(40.0 / 8.0)
    assert (naive.elapsed_median_s, naive.elapsed_max_s) == (40.0, 50.0)
    assert naive.throttled_median == 400
    assert naive.torch_threads == 2
    assert naive.cpu_median_s == pytest.approx(80.0)
    # The same work as 2 managed students (1 thread each): 2 x 1 x 10 s / 2 CPUs.
    assert naive.ideal_makespan_s == pytest.approx(10.0)
    assert by_label["managed", 2].slowdown == pytest.approx(8.3 / 8.0)
    over = by_label["overcommit", 4]
    assert over.ideal_makespan_s == pytest.approx(20.0)
    assert over.makespan_ratio == pytest.approx(1.05)
    assert [(r.mode, r.n_students) for r in rows] == [
        ("managed", 1),
        ("managed", 2),
        ("naive", 2),
        ("overcommit", 4),
    ]


def test_repeats_are_merged_before_the_medians():
    results = [
        *sample_results(),
        scenario_result("managed", [student(12.0)], 14.0),
        scenario_result("managed", [student(10.0)], 12.0),
    ]
    merged = merge_repeats(results)
    assert [r.scenario.label for r in merged] == [
        "managed x1",
        "naive x2",
        "managed x2",
        "overcommit x4",
    ]
    assert [s.train_s for s in merged[0].students] == [8.0, 12.0, 10.0]
    assert merged[0].makespan_s == 12.0
    rows = plan_rows(results, cpu_budget=2)
    assert rows[0].elapsed_median_s == 10.0
    assert rows[0].makespan_s == 12.0


def test_rows_fall_back_to_wall_time_and_count_failures():
    results = [
        scenario_result("managed", [student(8.0)], 10.0),
        scenario_result("naive", [student(None, wall_s=60.0, rc=-9), student(20.0)], 60.0),
    ]
    naive = plan_rows(results, cpu_budget=2)[1]
    assert naive.elapsed_max_s == 60.0
    assert naive.failed == 1


def test_rows_say_when_no_quota_applied():
    results = [
        scenario_result("managed", [student(8.0, enforcement="none")], 10.0),
        scenario_result("managed", [student(8.0), student(8.0, enforcement="none")], 10.0),
    ]
    assert [r.quota_applied for r in plan_rows(results, cpu_budget=2)] == [False, False]


def test_rows_need_the_baseline():
    with pytest.raises(ValueError, match="baseline"):
        plan_rows([scenario_result("naive", [student(8.0)], 10.0)], cpu_budget=2)


def test_targets_are_checked_where_they_apply():
    rows = plan_rows(sample_results(), cpu_budget=2)
    targets = check_targets(rows, n_threads=1, cpu_budget=2)
    assert [(t.text.split(":")[0], round(t.value, 4), t.met) for t in targets] == [
        ("managed x2", 1.0375, True),
        ("naive x2", 5.0, True),
        ("overcommit x4", 1.05, True),
    ]


def test_targets_report_a_miss():
    results = sample_results()
    results[2] = scenario_result("managed", [student(9.6), student(9.6)], 12.0)
    targets = check_targets(plan_rows(results, cpu_budget=2), n_threads=1, cpu_budget=2)
    assert [t.met for t in targets] == [False, True, True]
    text = render_targets(targets)
    # one run of each: the verdict is given by the median but flagged as inconclusive
    assert (
        "target inconclusive (NOT met by the median): managed x2: slowdown <= 1.05 "
        "(measured 1.20, 95% interval 1.20-1.20)" in text
    )
    assert "warning: one repeat only" in text
    assert "WARNING: the machine was too noisy to conclude" in text


def test_a_baseline_that_waited_for_cpu_is_flagged():
    rows = plan_rows(sample_results(), cpu_budget=2)
    assert check_baseline(rows) is None  # 8 s elapsed, 8 s CPU
    waited = [scenario_result("managed", [student(26.2)], 32.0)]
    waited[0] = ScenarioResult(
        waited[0].scenario, (replace(waited[0].students[0], cpu_s=11.6),), 32.0
    )
    warning = check_baseline(plan_rows(waited, cpu_budget=2))
    assert warning is not None and "elapsed 26.2 s, CPU 11.6 s" in warning


def baseline_of(train_s, cpu_s, threads, waited_s):
    result = scenario_result("managed", [student(train_s, threads=threads)], train_s + 2)
    alone = replace(result.students[0], cpu_s=cpu_s, waited_s=waited_s)
    return plan_rows([ScenarioResult(result.scenario, (alone,), train_s + 2)], cpu_budget=16)


def test_a_two_thread_baseline_that_cannot_fill_its_threads_is_not_taken_for_contention():
    # 5.9 s elapsed, 7.0 s CPU on 2 threads: the LSTM keeps its threads 60 % busy
    assert check_baseline(baseline_of(5.9, 7.0, 2, waited_s=0.03)) is None
    assert check_baseline(baseline_of(5.9, 7.0, 2, waited_s=None)) is None


def test_a_baseline_that_waited_on_the_run_queue_is_flagged_whatever_its_threads():
    for threads in (1, 2, 8):
        warning = check_baseline(baseline_of(6.0, 6.0 * threads, threads, waited_s=0.9))
        assert warning is not None and "waited on a run queue 0.90 s of 6.0 s (15%)" in warning
    assert check_baseline(baseline_of(6.0, 6.0, 1, waited_s=0.25)) is None  # 4 %: quiet enough


def test_run_queue_waits_are_listed_per_scenario_when_known():
    rows = baseline_of(6.0, 6.0, 1, waited_s=0.12)
    assert render_waits(rows) == (
        "waited on a run queue per student over the steps (median, s): managed x1 0.12"
    )
    assert render_waits(baseline_of(6.0, 6.0, 1, waited_s=None)) is None


# --- text --------------------------------------------------------------------


def golden_rows() -> list[Row]:
    alone = [8.0, 7.6, 8.4]
    base = summarise_slowdowns([8.0] * 3, alone)
    base = replace(base, baseline=describe_spread(alone))
    managed = summarise_slowdowns(alone, [8.3, 7.9, 8.8], 1.05)
    naive = summarise_slowdowns(alone, [41.0, 38.0, 44.5], 3.0, at_most=False)
    return [
        Row("managed", 1, 1, 8.0, 8.4, 7.9, 1.0, 0, 9.5, 9.5, 0, True, base, 1.0),
        Row("managed", 2, 1, 8.3, 8.8, 8.1, managed.median, 3, 9.9, 9.5, 0, True, managed, 1.03),
        Row("naive", 2, 2, 41.0, 44.5, 80.2, naive.median, 812, 45.0, 19.0, 0, True, naive, 10.1),
        Row("overcommit", 4, 1, 8.1, 8.4, None, 1.0125, None, 19.8, 19.0, 1, False),
    ]


def test_table_matches_golden_text():
    text = render_table(golden_rows(), baseline_s=8.0, cpu_budget=2)
    assert_matches_golden(text + "\n", "bench_contention_table.txt.golden")


def test_header_says_when_no_quota_applied():
    load = ((0.5, 0.4, 0.3), (1.25, 0.5, 0.3))
    text = render_header(1000, 64, 1.0, 2, ["none", "none"], load)
    assert "no CPU quota applied" in text
    assert "load average (1 min) before 0.50, after 1.25" in text
    assert "CPU quota 1 CPU per student (cgroup v1)" in render_header(
        1000, 64, 1.0, 2, ["cgroup v1"], load
    )


def test_targets_text_when_none_applies():
    assert "none of the benchmark's targets" in render_targets([])
    assert render_targets([Target("x", 2.0, True)]) == "target met: x (measured 2.00)"


def test_the_baseline_spread_is_described_under_the_table():
    text = render_table(golden_rows(), baseline_s=8.0, cpu_budget=2)
    assert (
        "baseline: 3 alone runs of one managed student: min 7.60 s, median 8.00 s, "
        "max 8.40 s (IQR 7.80-8.20 s; max-min = 10% of the median)" in text
    )
    assert render_spread(describe_spread([5.0])).startswith("baseline: 1 alone run of")


def test_the_plot_is_written_as_png(tmp_path):
    path = tmp_path / "out" / "contention.png"
    save_plot(golden_rows(), path, "title")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["contention.png"]


# --- statistics of repeated runs -------------------------------------------------


def test_paired_slowdowns_cancel_a_machine_that_drifts():
    # each pair run is 2 % slower than the alone run just before, while the
    # machine itself slows from 5 s to 9 s: the medians of each side would
    # give 1.00, the paired ratios give the 2 %
    alone = [5.0, 6.0, 7.0, 8.0, 9.0]
    pair = [a * 1.02 for a in [5.0, 6.0, 7.0, 8.0, 9.0]]
    summary = summarise_slowdowns(alone, pair, target=1.05)
    assert summary.ratios == pytest.approx([1.02] * 5)
    assert (summary.median, summary.low, summary.high) == pytest.approx((1.02, 1.02, 1.02))
    assert summary.met is True
    # but the alone runs differ by 57 % of their median: too noisy to conclude
    assert summary.baseline.relative == pytest.approx(4.0 / 7.0)
    assert not summary.conclusive
    assert "differ by 57% of their median" in summary.warnings[0]


@pytest.mark.parametrize(
    ("pair", "target", "at_most", "met", "straddles"),
    [
        ([8.1, 8.2, 8.0, 8.3, 8.1], 1.05, True, True, False),  # clearly under 1.05
        ([8.8, 9.0, 8.9, 9.1, 8.8], 1.05, True, False, False),  # clearly over
        ([8.0, 8.8, 8.2, 8.9, 8.3], 1.05, True, True, True),  # median under, interval across
        ([30.0, 32.0, 29.0, 35.0, 31.0], 3.0, False, True, False),  # naive collapse >= 3
        ([23.0, 27.0, 24.5, 26.0, 25.0], 3.0, False, True, True),  # median over, interval across
    ],
)
def test_the_target_is_judged_on_the_median_and_flagged_when_the_interval_straddles_it(
    pair, target, at_most, met, straddles
):
    alone = [8.0, 8.1, 7.9, 8.0, 8.05]
    summary = summarise_slowdowns(alone, pair, target=target, at_most=at_most)
    assert summary.met is met
    assert summary.low <= summary.median <= summary.high
    assert min(summary.ratios) <= summary.low and summary.high <= max(summary.ratios)
    assert any("straddles the target" in w for w in summary.warnings) is straddles
    assert summary.conclusive is not straddles


def test_the_bootstrap_interval_is_reproducible_with_its_seed():
    ratios = [1.01, 1.07, 0.98, 1.12, 1.03, 1.05, 0.99]
    first = bootstrap_median_interval(ratios, seed=3)
    assert bootstrap_median_interval(ratios, seed=3) == first
    assert bootstrap_median_interval(ratios, confidence=0.5, seed=3) != first
    low, high = first
    assert 0.98 <= low < 1.03 < high <= 1.12


def test_one_repeat_gives_no_interval_and_says_so():
    summary = summarise_slowdowns([8.0], [8.2], target=1.05)
    assert summary.low == summary.high == summary.median == pytest.approx(1.025)
    assert summary.warnings == ("one repeat only: no interval (use --repeat 5 or more)",)


@pytest.mark.parametrize(
    ("alone", "pair"), [([], []), ([8.0, 8.0], [8.0]), ([8.0], [0.0]), ([-1.0], [8.0])]
)
def test_summaries_need_as_many_positive_alone_runs_as_paired_runs(alone, pair):
    with pytest.raises(ValueError, match=r"alone runs|> 0"):
        summarise_slowdowns(alone, pair)


@pytest.mark.parametrize(
    ("values", "expect"),
    [
        ([5.0], (1, 5.0, 5.0, 5.0, 5.0, 5.0)),
        ([4.8, 7.0], (2, 4.8, 5.35, 5.9, 6.45, 7.0)),
        ([3.0, 1.0, 2.0, 5.0, 4.0], (5, 1.0, 2.0, 3.0, 4.0, 5.0)),
    ],
)
def test_spread_gives_min_quartiles_median_max(values, expect):
    spread = describe_spread(values)
    got = (spread.n, spread.min, spread.q1, spread.median, spread.q3, spread.max)
    assert got == pytest.approx(expect)


def test_scenarios_are_interleaved_with_runs_alone():
    alone, a, b = plan_scenarios((1, 2), ("naive",), 1.0, 1)
    assert plan_order((alone, a, b), 2) == [alone, a, alone, b, alone, a, alone, b]
    assert plan_order((alone,), 3) == [alone, alone, alone]


def test_each_run_is_paired_with_the_alone_run_just_before_it():
    alone = [scenario_result("managed", [student(t)], t + 2) for t in (5.0, 7.0)]
    pair = [scenario_result("managed", [student(t), student(t)], t + 2) for t in (5.5, 7.7)]
    late = scenario_result("naive", [student(20.0), student(20.0)], 22.0)
    pairs = pair_with_baseline([late, alone[0], pair[0], alone[1], pair[1]])
    assert [(a.students[0].train_s, r.students[0].train_s) for a, r in pairs[pair[0].scenario]] == [
        (5.0, 5.5),
        (7.0, 7.7),
    ]
    assert [a.students[0].train_s for a, _ in pairs[late.scenario]] == [5.0]  # none before it


def test_rows_use_paired_slowdowns_over_interleaved_repeats():
    results = []
    for t in (5.0, 6.0, 7.0, 8.0, 9.0):  # a machine that slows down run after run
        results.append(scenario_result("managed", [student(t)], t + 2))
        results.append(scenario_result("managed", [student(t * 1.02), student(t * 1.04)], t + 2))
    rows = plan_rows(results, cpu_budget=2, seed=1)
    base, pair = rows
    assert pair.slowdown == pytest.approx(1.03)
    assert pair.summary is not None and len(pair.summary.ratios) == 5
    assert pair.cpu_ratio == pytest.approx(1.03)
    assert base.summary is not None and base.summary.baseline.min == 5.0
    assert any("differ by 57%" in w for w in pair.summary.warnings)
    targets = check_targets(rows, n_threads=1, cpu_budget=2)
    # every paired ratio is 1.03: met, conclusively; the spread is the whole run's warning
    assert targets[0].met and not targets[0].warnings
    text = render_targets(targets, base.summary.warnings)
    assert text.splitlines()[0] == (
        "target met: managed x2: slowdown <= 1.05 (measured 1.03, 95% interval 1.03-1.03)"
    )
    assert text.count("differ by 57%") == 1
    assert text.splitlines()[-1].startswith("WARNING: the machine was too noisy to conclude")


def test_runs_where_a_student_crashed_are_left_out_of_the_slowdown():
    crash = student(None, wall_s=2.0, rc=1)  # e.g. an import error: 2 s, not a training time
    results = [
        scenario_result("managed", [student(8.0)], 10.0),
        scenario_result("managed", [student(8.2), student(8.4)], 10.0),
        scenario_result("managed", [student(8.0)], 10.0),
        scenario_result("managed", [crash, crash], 2.0),
        scenario_result("managed", [crash], 2.0),
        scenario_result("managed", [student(8.0), student(8.0)], 10.0),
    ]
    base, pair = plan_rows(results, cpu_budget=2)
    assert pair.summary is not None
    assert pair.summary.ratios == pytest.approx([1.0375])
    assert "2 of 3 runs of managed x2 left out of the slowdown" in pair.summary.warnings[-1]
    assert pair.failed == 2 and base.failed == 1
    assert len(base.summary.ratios) == 2  # the crashed alone run is left out too


def test_a_scenario_where_every_run_crashed_has_no_slowdown():
    crash = student(None, wall_s=2.0, rc=1)
    results = [
        scenario_result("managed", [student(8.0)], 10.0),
        scenario_result("managed", [crash, crash], 2.0),
    ]
    rows = plan_rows(results, cpu_budget=2)
    assert rows[1].summary is None and math.isnan(rows[1].slowdown)
    assert "       -" in render_table(rows, 8.0, 2).splitlines()[2]
    [target] = check_targets(rows, n_threads=1, cpu_budget=2)
    assert render_targets([target]).splitlines()[0] == (
        "target inconclusive (NOT met by the median): managed x2: slowdown <= 1.05 (measured -)"
    )


def test_bench_cli_repeats_five_times_by_default_and_checks_the_seed():
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    assert (args.repeat, args.seed) == ("5", "0")
    assert parse_seed("7") == 7
    for bad in ("-1", "x", "1.5"):
        with pytest.raises(UsageError, match="--seed"):
            parse_seed(bad)


# --- GPU check decisions -----------------------------------------------------


GPU = GpuInfo(0, "NVIDIA A40", "GPU-1", 48 * 1024**3, 500 * 1024**2, ())


@pytest.mark.parametrize(
    ("inventory", "cuda", "enabled", "expect"),
    [
        ([], False, True, "no GPU seen by NVML"),
        ([GPU], False, True, "this torch build has no CUDA"),
        ([GPU], True, False, "not asked for"),
    ],
)
def test_gpu_check_is_skipped_with_a_reason(inventory, cuda, enabled, expect):
    plan, message = plan_gpu_check(inventory, cuda, 3, enabled)
    assert plan is None
    assert expect in message


def test_gpu_check_runs_on_the_first_gpu():
    plan, message = plan_gpu_check([GPU], True, 3)
    assert plan is not None and (plan.index, plan.n_students) == (0, 3)
    assert message == "GPU check: 3 students at once on GPU 0 (NVIDIA A40)"


def test_release_is_judged_against_what_still_runs():
    MiB = 1024**2
    peaks = [600 * MiB, 700 * MiB, None]
    exits = [
        ExitSample(0, 500 * MiB + 700 * MiB + 10 * MiB, (1,)),  # only student 1 left: freed
        ExitSample(1, 500 * MiB + 300 * MiB, ()),  # nothing left but 300 MiB held: leaked
        ExitSample(2, 500 * MiB, ()),
    ]
    assert judge_release(500 * MiB, exits, peaks) == [True, False, True]


def test_describe_median_gives_the_median_its_interval_and_n():
    line = describe_median("speed-up", [2.03, 1.41, 1.97], "x")
    low, high = bootstrap_median_interval([2.03, 1.41, 1.97])
    assert line == f"speed-up: median 1.97x, 95 % interval [{low:.3g}, {high:.3g}] (n=3)"
    one = describe_median("one", [5.0], " s")
    assert one == "one: 5 s, no interval (n=1: repeat at least twice)"
    with pytest.raises(ValueError, match="no values"):
        describe_median("none", [])
