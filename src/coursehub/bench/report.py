"""The benchmark's outputs: the talk's table as text, a JSON document, a plot.

``render_*`` functions are pure (text and dicts); ``write_json`` and
``save_plot`` write atomically (a temporary file in the same folder, then
``os.replace``), so a failed run never leaves half a file. matplotlib is
imported inside :func:`save_plot` with the Agg backend.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coursehub.atomicfile import atomic_path, write_atomically
from coursehub.bench.contention import BenchRun
from coursehub.bench.scenarios import ScenarioResult
from coursehub.bench.stats import Spread
from coursehub.bench.students import BenchSettings
from coursehub.bench.summary import (
    MANAGED_MAX_SLOWDOWN,
    NAIVE_MIN_SLOWDOWN,
    Row,
    Target,
    check_baseline,
    check_targets,
    plan_rows,
)
from coursehub.errors import UsageError

HEADER = (
    "students  mode        threads  elapsed med  elapsed max  CPU med  CPU x  slowdown  "
    "95% interval  throttled  makespan  ideal  ratio"
)


def _num(value: float | int | None, spec: str, width: int) -> str:
    return ("-" if value is None else format(value, spec)).rjust(width)


def render_row(row: Row) -> str:
    """Return one line of the table (times in seconds, slowdown as ``4.20x``)."""
    line = "  ".join(
        [
            str(row.n_students).rjust(8),
            row.mode.ljust(10),
            _num(row.torch_threads, "d", 7),
            _num(row.elapsed_median_s, ".1f", 11),
            _num(row.elapsed_max_s, ".1f", 11),
            _num(row.cpu_median_s, ".1f", 7),
            _num(row.cpu_ratio, ".2f", 5),
            ("-" if math.isnan(row.slowdown) else f"{row.slowdown:.2f}x").rjust(8),
            render_interval(row.summary.low, row.summary.high) if row.summary else "-".rjust(12),
            _num(row.throttled_median, "d", 9),
            _num(row.makespan_s, ".1f", 8),
            _num(row.ideal_makespan_s, ".1f", 5),
            _num(row.makespan_ratio, ".2f", 5),
        ]
    )
    notes = [f"{row.failed} failed"] if row.failed else []
    notes += [] if row.quota_applied else ["no quota"]
    return line + (f"  ({', '.join(notes)})" if notes else "")


def render_interval(low: float, high: float) -> str:
    """Return an interval as ``1.01-1.06``, right-aligned under its 12-character header."""
    return f"{low:.2f}-{high:.2f}".rjust(12)


def render_spread(spread: Spread) -> str:
    """Return the line describing the alone runs: how many, min/median/max, IQR, spread."""
    return (
        f"baseline: {spread.n} alone run{'s' if spread.n != 1 else ''} of one managed student: "
        f"min {spread.min:.2f} s, median {spread.median:.2f} s, max {spread.max:.2f} s "
        f"(IQR {spread.q1:.2f}-{spread.q3:.2f} s; max-min = {spread.relative:.0%} of the median)"
    )


def render_waits(rows: Sequence[Row]) -> str | None:
    """Return the run-queue wait per student of each scenario on one line, None if unknown.

    The wait is time a student's threads were runnable but had no CPU
    (:func:`coursehub.bench.workload.run_queue_wait_s`): near 0 when the
    students fit the machine, large when they fight for it.
    """
    parts = [
        f"{row.mode} x{row.n_students} {row.waited_median_s:.2f}"
        for row in rows
        if row.waited_median_s is not None
    ]
    if not parts:
        return None
    return "waited on a run queue per student over the steps (median, s): " + ", ".join(parts)


def render_table(rows: Sequence[Row], baseline_s: float, cpu_budget: int) -> str:
    """Return the table with its definitions, one line per scenario.

    Parameters
    ----------
    rows
        From :func:`coursehub.bench.summary.plan_rows`.
    baseline_s
        Median elapsed of the baseline (one managed student), seconds.
    cpu_budget
        CPUs of the machine (for the ideal makespan).
    """
    lines = [HEADER, *(render_row(r) for r in rows), ""]
    base = next((r for r in rows if r.mode == "managed" and r.n_students == 1), None)
    if base is not None and base.summary is not None:
        lines.append(render_spread(base.summary.baseline))
    waits = render_waits(rows)
    if waits:
        lines.append(waits)
    lines += [
        "elapsed: training time per student as the workload measures it (s); CPU: that "
        "process's CPU time over the same steps, all threads (s)",
        "slowdown: median over the repeats of (median elapsed of the run / elapsed of the "
        "alone run just before it); runs interleaved alone, scenario, alone, scenario...; "
        f"{baseline_s:.1f} s: median of the alone runs",
        "95% interval: percentile bootstrap of that median (repeats resampled, seeded); "
        "CPU x: the same ratio with CPU time per student",
        "throttled: CFS periods throttled per student, median (cgroup cpu.stat nr_throttled)",
        "makespan: first start to last exit, queue included (s); ideal = max(T1, students x "
        f"threads x T1 / {cpu_budget} CPUs), T1 = the baseline's makespan and threads",
    ]
    return "\n".join(lines)


def render_header(
    steps: int,
    batch_size: int,
    cpu_limit: float,
    cpu_budget: int,
    enforcement: Sequence[str],
    load: tuple[tuple[float, ...], tuple[float, ...]],
) -> str:
    """Return the lines above the table: workload, quota (or that none applied), load average."""
    applied = sorted({e for e in enforcement if e != "none"})
    if applied and "none" not in enforcement:
        quota = f"CPU quota {cpu_limit:g} CPU per student ({', '.join(applied)})"
    elif applied:
        quota = f"CPU quota {cpu_limit:g} CPU applied to some students only ({', '.join(applied)})"
    else:
        quota = (
            f"no CPU quota applied (needs root and a writable cgroup filesystem); "
            f"cpu_limit {cpu_limit:g} sets the threads only"
        )
    before, after = load
    return "\n".join(
        [
            f"workload: pendulum LSTM, {steps} steps of batch {batch_size} per student; "
            f"{cpu_budget} CPUs",
            quota,
            f"load average (1 min) before {before[0]:.2f}, after {after[0]:.2f}",
        ]
    )


def render_target(target: Target) -> str:
    """Return a target's line: ``met``/``NOT met``/``inconclusive``, what, figure, interval."""
    verdict = "met" if target.met else "NOT met"
    if target.warnings:
        verdict = f"inconclusive ({verdict} by the median)"
    interval = ""
    if target.low is not None and target.high is not None:
        interval = f", 95% interval {target.low:.2f}-{target.high:.2f}"
    value = "-" if math.isnan(target.value) else f"{target.value:.2f}"
    return f"target {verdict}: {target.text} (measured {value}{interval})"


def render_targets(targets: Sequence[Target], notes: Sequence[str] = ()) -> str:
    """Return one line per target, then the warnings (each once) and a verdict on noise.

    ``notes``: warnings about the whole run (the spread of the alone runs).
    """
    if not targets:
        lines = ["targets: none of the benchmark's targets applies to these scenarios"]
    else:
        lines = [render_target(t) for t in targets]
    warnings = list(dict.fromkeys([*notes, *(w for t in targets for w in t.warnings)]))
    lines += [f"warning: {w}" for w in warnings]
    if warnings:
        lines.append(
            "WARNING: the machine was too noisy to conclude; rerun with a larger --repeat, on "
            "a quieter machine, or as root with --cpu-shares 262144"
        )
    return "\n".join(lines)


def render_report(
    run: BenchRun, settings: BenchSettings, cpu_limit: float, n_threads: int
) -> tuple[str, list[Row], list[Target]]:
    """Return the printed report (header, table, targets) with its rows and targets."""
    rows = plan_rows(run.results, settings.cpu_budget, seed=settings.seed)
    targets = check_targets(rows, n_threads, settings.cpu_budget)
    baseline = next(r for r in rows if r.mode == "managed" and r.n_students == 1)
    enforcement = [s.enforcement for r in run.results for s in r.students]
    header = render_header(
        settings.steps,
        settings.batch_size,
        cpu_limit,
        settings.cpu_budget,
        enforcement,
        (run.load_before, run.load_after),
    )
    header += (
        f"\neach scenario run {settings.repeat} time{'s' if settings.repeat > 1 else ''}, "
        "each run right after one student alone (interleaved)"
    )
    if settings.cpu_shares is not None and not run.notes:
        header += (
            f"\nstudents' parent cgroup {settings.cgroup_parent}: CPU weight "
            f"{settings.cpu_shares} (cpu.shares; 1024 for any other process)"
        )
    header += "".join(f"\n{note}" for note in run.notes)
    table = render_table(rows, baseline.elapsed_median_s, settings.cpu_budget)
    waited = check_baseline(rows)
    notes = [
        *(baseline.summary.warnings if baseline.summary else ()),
        *([waited] if waited else []),
    ]
    footer = render_targets(targets, notes)
    return f"{header}\n\n{table}\n\n{footer}", rows, targets


def render_document(
    settings: dict[str, Any],
    results: Sequence[ScenarioResult],
    rows: Sequence[Row],
    targets: Sequence[Target],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return the JSON document: settings, per-student results, table rows, targets, extras."""
    return {
        "settings": settings,
        "scenarios": [dataclasses.asdict(r) for r in results],
        "rows": [{**dataclasses.asdict(r), "makespan_ratio": r.makespan_ratio} for r in rows],
        "targets": [dataclasses.asdict(t) for t in targets],
        **(extra or {}),
    }


def write_json(document: dict[str, Any], path: Path) -> None:
    """Write ``document`` to ``path`` as indented JSON, atomically.

    Raises
    ------
    UsageError
        If the folder cannot be written.
    """
    try:
        write_atomically(path, json.dumps(document, indent=1) + "\n", mode=None)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def save_plot(rows: Sequence[Row], path: Path, title: str) -> None:
    """Plot the scenarios as PNG: elapsed per student (left), slowdown per repeat (right).

    Left: elapsed per student against students, one line per mode, log y
    axis, the median with a bar up to the slowest student; a dotted line
    marks the baseline. Right: each repeat's paired slowdown as a dot, the
    median as a marker with its bootstrap interval as a bar, dashed lines at
    the benchmark's targets.

    Raises
    ------
    UsageError
        If the folder cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter

    fig = Figure(figsize=(11.0, 4.5), layout="constrained")
    ax, sx = fig.subplots(1, 2)
    modes = list(dict.fromkeys(r.mode for r in rows))
    for k, mode in enumerate(modes):
        own = [r for r in rows if r.mode == mode]
        _plot_mode(ax, sx, own, mode, offset=(k - (len(modes) - 1) / 2) * 0.12)
    _style_elapsed_axes(ax, rows, title, FormatStrFormatter)
    _style_slowdown_axes(sx, rows, FormatStrFormatter)
    try:
        with atomic_path(path, mode=None) as tmp:
            fig.savefig(tmp, format="png", dpi=120)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _plot_mode(ax: Any, sx: Any, own: Sequence[Row], mode: str, offset: float) -> None:
    """Draw one mode's rows: elapsed per student on ``ax``, slowdowns on ``sx``.

    ``offset`` shifts the mode's slowdown markers along x (in students) so
    that modes at the same count do not hide each other.
    """
    x = [r.n_students for r in own]
    y = [r.elapsed_median_s for r in own]
    spread = [[0.0] * len(own), [r.elapsed_max_s - r.elapsed_median_s for r in own]]
    line = ax.errorbar(x, y, yerr=spread, marker="o", capsize=3, label=mode)
    color = line.lines[0].get_color()
    for r in own:
        if r.summary is None:
            continue
        ratios = r.summary.ratios
        jitter = [offset + 0.04 * ((j % 5) - 2) for j in range(len(ratios))]
        sx.scatter(
            [r.n_students + d for d in jitter],
            ratios,
            s=14,
            alpha=0.6,
            color=color,
            edgecolors="none",
            zorder=3,
        )
        bar = [[r.slowdown - r.summary.low], [r.summary.high - r.slowdown]]
        sx.errorbar(
            [r.n_students + offset],
            [r.slowdown],
            yerr=bar,
            marker="D",
            capsize=4,
            color=color,
            label=mode if r is own[0] else None,
        )


def _style_x_axis(axis: Any, rows: Sequence[Row]) -> None:
    """Margins, one tick per student count, and the x label shared by both panels."""
    axis.margins(x=0.1)
    axis.set_xticks(sorted({r.n_students for r in rows}))
    axis.set_xlabel("students training at once")


def _style_elapsed_axes(ax: Any, rows: Sequence[Row], title: str, formatter: Any) -> None:
    """The left panel: the baseline line (managed, 1 student), log y axis, labels, legend."""
    baseline = next(r for r in rows if r.mode == "managed" and r.n_students == 1)
    ax.axhline(baseline.elapsed_median_s, linestyle=":", color="grey", label="1 student alone")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(formatter("%g"))
    ax.yaxis.set_minor_formatter(formatter("%g"))
    _style_x_axis(ax, rows)
    ax.set_ylabel("elapsed per student (s, median; bar to max)")
    ax.set_title(title, fontsize=9)
    ax.legend()


def _style_slowdown_axes(sx: Any, rows: Sequence[Row], formatter: Any) -> None:
    """The right panel: log y axis, dashed lines at the benchmark's targets, labels, legend."""
    _style_x_axis(sx, rows)
    sx.set_yscale("log")
    sx.yaxis.set_major_formatter(formatter("%g"))
    for bound, text in (
        (MANAGED_MAX_SLOWDOWN, "managed target"),
        (NAIVE_MIN_SLOWDOWN, "naive target"),
    ):
        sx.axhline(bound, linestyle="--", color="grey", linewidth=0.8)
        sx.annotate(
            text,
            (0.01, bound),
            xycoords=("axes fraction", "data"),
            fontsize=7,
            xytext=(0, 2),
            textcoords="offset points",
            color="grey",
        )
    sx.yaxis.set_minor_formatter(formatter("%g"))
    sx.set_ylabel("slowdown (dots: repeats; bar: 95% interval)")
    sx.set_title("slowdown per repeat, median and bootstrap interval", fontsize=10)
    sx.legend()
