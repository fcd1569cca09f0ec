"""The benchmark's outputs: the talk's table as text, a JSON document, a plot.

``render_*`` functions are pure (text and dicts); ``write_json`` and
``save_plot`` write atomically (a temporary file in the same folder, then
``os.replace``), so a failed run never leaves half a file. matplotlib is
imported inside :func:`save_plot` with the Agg backend.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coursehub.bench.contention import BenchRun, BenchSettings
from coursehub.bench.scenarios import ScenarioResult
from coursehub.bench.summary import Row, Target, check_baseline, check_targets, plan_rows
from coursehub.errors import UsageError

HEADER = (
    "students  mode        threads  elapsed med  elapsed max  CPU med  slowdown  "
    "throttled  makespan  ideal  ratio"
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
            f"{row.slowdown:.2f}x".rjust(8),
            _num(row.throttled_median, "d", 9),
            _num(row.makespan_s, ".1f", 8),
            _num(row.ideal_makespan_s, ".1f", 5),
            _num(row.makespan_ratio, ".2f", 5),
        ]
    )
    notes = [f"{row.failed} failed"] if row.failed else []
    notes += [] if row.quota_applied else ["no quota"]
    return line + (f"  ({', '.join(notes)})" if notes else "")


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
    lines += [
        "elapsed: training time per student as the workload measures it (s); CPU: that "
        "process's CPU time over the same steps, all threads (s)",
        f"slowdown: median elapsed / {baseline_s:.1f} s, the median of one managed student "
        "alone (the baseline of every mode)",
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
        quota = f"no CPU quota applied (needs root and a writable cgroup filesystem); " \
                f"cpu_limit {cpu_limit:g} sets the threads only"  # fmt: skip
    before, after = load
    return "\n".join(
        [
            f"workload: pendulum LSTM, {steps} steps of batch {batch_size} per student; "
            f"{cpu_budget} CPUs",
            quota,
            f"load average (1 min) before {before[0]:.2f}, after {after[0]:.2f}",
        ]
    )


def render_targets(targets: Sequence[Target]) -> str:
    """Return one line per target: ``met`` or ``NOT met``, what, and the measured figure."""
    if not targets:
        return "targets: none of the issue's targets applies to these scenarios"
    return "\n".join(
        f"target {'met' if t.met else 'NOT met'}: {t.text} (measured {t.value:.2f})"
        for t in targets
    )


def render_report(
    run: BenchRun, settings: BenchSettings, cpu_limit: float, n_threads: int
) -> tuple[str, list[Row], list[Target]]:
    """Return the printed report (header, table, targets) with its rows and targets."""
    rows = plan_rows(run.results, settings.cpu_budget)
    targets = check_targets(rows, n_threads, settings.cpu_budget)
    baseline = next(r for r in rows if r.mode == "managed" and r.n_students == 1)
    enforcement = [s.enforcement for r in run.results for s in r.students]
    header = render_header(settings.steps, settings.batch_size, cpu_limit, settings.cpu_budget,
                           enforcement, (run.load_before, run.load_after))  # fmt: skip
    if settings.repeat > 1:
        header += f"\neach scenario run {settings.repeat} times: medians over all its runs"
    if settings.cpu_shares is not None and not run.notes:
        header += (f"\nstudents' parent cgroup {settings.cgroup_parent}: CPU weight "
                   f"{settings.cpu_shares} (cpu.shares; 1024 for any other process)")  # fmt: skip
    header += "".join(f"\n{note}" for note in run.notes)
    table = render_table(rows, baseline.elapsed_median_s, settings.cpu_budget)
    warning = check_baseline(rows)
    footer = render_targets(targets) + (f"\n{warning}" if warning else "")
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


@contextlib.contextmanager
def _atomic_path(path: Path) -> Any:
    """Yield a temporary path beside ``path``; move it onto ``path`` if the block succeeds."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_json(document: dict[str, Any], path: Path) -> None:
    """Write ``document`` to ``path`` as indented JSON, atomically.

    Raises
    ------
    UsageError
        If the folder cannot be written.
    """
    with _atomic_path(path) as tmp:
        tmp.write_text(json.dumps(document, indent=1) + "\n")


def save_plot(rows: Sequence[Row], path: Path, title: str) -> None:
    """Plot elapsed per student against students, one line per mode, log y axis; save as PNG.

    Each point is the median with a bar up to the slowest student, labelled
    with its slowdown; a dotted line marks the baseline (one managed student).

    Raises
    ------
    UsageError
        If the folder cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter

    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for mode in dict.fromkeys(r.mode for r in rows):
        own = [r for r in rows if r.mode == mode]
        x = [r.n_students for r in own]
        y = [r.elapsed_median_s for r in own]
        spread = [[0.0] * len(own), [r.elapsed_max_s - r.elapsed_median_s for r in own]]
        ax.errorbar(x, y, yerr=spread, marker="o", capsize=3, label=mode)
        for r in own:
            ax.annotate(f"{r.slowdown:.2f}x", (r.n_students, r.elapsed_median_s),
                        textcoords="offset points", xytext=(6, 4), fontsize=8)  # fmt: skip
    baseline = next(r for r in rows if r.mode == "managed" and r.n_students == 1)
    ax.axhline(baseline.elapsed_median_s, linestyle=":", color="grey", label="1 student alone")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.margins(x=0.1)
    ax.set_xticks(sorted({r.n_students for r in rows}))
    ax.set_xlabel("students training at once")
    ax.set_ylabel("elapsed per student (s, median; bar to max)")
    ax.set_title(title, fontsize=10)
    ax.legend()
    with _atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
