"""The exam spawn benchmark's checks and summary (pure): ``benchmarks/bench_exam_spawn.py``.

The benchmark requests every student's server at once while their exam runs
(a class at 8:00) and times them; the target is every server ready within
:data:`TARGET_S` of the first request. :func:`exam_server_problem` says
whether a started server is an exam server (its environment and its exam
home), :func:`start_times_of_log` reads the hub's own start times from its
log, :func:`summarise_round` and :func:`summarise_rounds` write the figures.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from coursehub.bench.stats import describe_median

#: Seconds from the first request within which every server should be ready.
TARGET_S = 60.0
#: JupyterHub's log line for a started server (``BaseHandler.spawn_single_user``).
START_LINE = re.compile(r"User (\S+) took ([0-9.]+) seconds to start")


@dataclass(frozen=True)
class ExamRound:
    """One repeat's figures.

    ``ready_s``: seconds from the first request to each ready server;
    ``server_cpu_s``: CPU seconds each exam server had used once all were
    ready; ``hub_start_s``: the hub's own start time of each server (its log);
    ``home_elsewhere``: exam servers whose ``HOME`` is not the exam home.
    """

    requested: int
    spawn_limit: int
    n_429: int
    ready_s: tuple[float, ...]
    failures: int
    not_exam: int
    server_cpu_s: tuple[float, ...] = ()
    hub_start_s: tuple[float, ...] = ()
    max_load: float = 0.0
    leftovers: int = 0
    home_elsewhere: int = 0

    def ready_within(self, limit_s: float = TARGET_S) -> int:
        """How many servers were ready within ``limit_s`` seconds of the first request."""
        return sum(1 for t in self.ready_s if t <= limit_s)


def exam_server_problem(
    environ: Mapping[str, str] | None, home: Path, exam: str, notebook: str
) -> str:
    """Return why a started server is not an exam server for ``exam``, or "" when it is.

    ``environ``: the server process's environment (None: no process found),
    which must hold ``COURSEHUB_EXAM`` = ``exam`` and, as the server's root
    folder, ``JUPYTERHUB_ROOT_DIR`` = ``home`` (the student's planned exam
    home); ``exam``: ``<course_id>/<assignment>``; ``notebook``: the exam
    notebook's file name, expected at ``home/<course_id>/<assignment>/notebook``
    (the hub's copy); ``HOME`` must be the exam home too
    (:mod:`coursehub.spawn.examhome`). Reads the file system only.
    """
    if environ is None:
        return "no server process found"
    if environ.get("COURSEHUB_EXAM") != exam:
        return f"COURSEHUB_EXAM is {environ.get('COURSEHUB_EXAM')!r}, not {exam!r}"
    if environ.get("JUPYTERHUB_ROOT_DIR") != str(home):
        return (
            f"the root folder is {environ.get('JUPYTERHUB_ROOT_DIR')!r}, not the exam home {home}"
        )
    if not (home / exam / notebook).is_file():
        return f"the exam notebook {home / exam / notebook} is missing"
    if not home_is_exam_home(environ, home):
        return f"HOME is {environ.get('HOME')!r}, not the exam home {home}"
    return ""


def home_is_exam_home(environ: Mapping[str, str] | None, home: Path) -> bool:
    """Whether the server process's ``HOME`` is the exam home ``home``."""
    return environ is not None and environ.get("HOME") == str(home)


def start_times_of_log(text: str, usernames: Sequence[str]) -> dict[str, float]:
    """Return ``{username: seconds}`` of the hub's "took N seconds to start" lines in ``text``.

    The last line of each user counts; users not in ``usernames`` are left out.
    """
    wanted = set(usernames)
    found: dict[str, float] = {}
    for match in START_LINE.finditer(text):
        name = match.group(1).split(":")[0]
        if name in wanted:
            found[name] = float(match.group(2))
    return found


def _median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f} s" if values else "-"


def summarise_round(r: ExamRound) -> list[str]:
    """Return one repeat's lines: requests, limit, 429s, ready times, failures, CPU, load."""
    times = sorted(r.ready_s)
    lines = [
        f"servers requested: {r.requested} (all at once); concurrent_spawn_limit {r.spawn_limit}; "
        f"HTTP 429 answers {r.n_429}",
    ]
    if times:
        lines.append(
            f"ready: {len(times)} of {r.requested}; first {times[0]:.1f} s, "
            f"median {statistics.median(times):.1f} s, last {times[-1]:.1f} s "
            f"after the first request; within {TARGET_S:g} s: {r.ready_within()}"
        )
    else:
        lines.append(f"ready: 0 of {r.requested}")
    lines.append(
        f"failures {r.failures}; not an exam server {r.not_exam} "
        f"(HOME not the exam home: {r.home_elsewhere}); "
        f"processes left {r.leftovers}; max load (1 min) {r.max_load:.1f}"
    )
    lines.append(
        f"hub's start time per server (log): median {_median(r.hub_start_s)}, "
        f"max {max(r.hub_start_s, default=0.0):.1f} s; server CPU at start: "
        f"median {_median(r.server_cpu_s)}, total {sum(r.server_cpu_s):.0f} s"
    )
    return lines


def summarise_rounds(rounds: Sequence[ExamRound]) -> list[str]:
    """Return the medians over the repeats, each with its 95 % interval (``describe_median``).

    The ready times count the repeats in which a server was ready.

    Raises
    ------
    ValueError
        If ``rounds`` is empty.
    """
    if not rounds:
        raise ValueError("no repeat to summarise")
    timed = [sorted(r.ready_s) for r in rounds if r.ready_s]
    lines = (
        [
            describe_median("first ready", [t[0] for t in timed], " s"),
            describe_median("median ready", [statistics.median(t) for t in timed], " s"),
            describe_median("last ready", [t[-1] for t in timed], " s"),
        ]
        if timed
        else ["no server ready in any repeat"]
    )
    lines += [
        describe_median(f"ready within {TARGET_S:g} s", [r.ready_within() for r in rounds]),
        describe_median("HTTP 429 answers", [r.n_429 for r in rounds]),
        describe_median("failures", [r.failures for r in rounds]),
    ]
    met = sum(1 for r in rounds if r.ready_within() == r.requested and not r.failures)
    lines.append(
        f"target (all {rounds[0].requested} ready within {TARGET_S:g} s): "
        f"met in {met} of {len(rounds)} repeats"
    )
    return lines
