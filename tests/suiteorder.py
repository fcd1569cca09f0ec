"""The test groups of pytest-xdist, and the order in which they are handed out: longest first.

``make test`` runs ``pytest -n N --dist loadgroup --no-loadscope-reorder``: each
group goes to one worker, in the order of the collection. A group is a test
file, so that its tests share its module- and session-scoped set-ups (a hub, a
built notebook) as in a serial run, or ``slurm`` for every Slurm test, since
they share one single-node cluster (its daemons and munge are host-wide), or
``nspawn`` for every test that boots a Debian container (tests/nspawnbox.py):
one after another, they make the root file system once and never boot two
containers at a time on a small machine.
Left to itself pytest-xdist sorts the groups by their number of tests, so that
the few long integration files (a demo started and killed, a Slurm cluster)
were handed out last and ran on alone at the end.
Here the groups are put in the order of their measured seconds, longest first
(the longest-processing-time rule of Graham, "Bounds on multiprocessing timing
anomalies", SIAM J. Appl. Math. 17(2), 1969), from ``tests/durations.json``.

That file holds ``{group: seconds}`` as measured. Refresh it with
``make test PYTEST_ARGS=--store-durations`` (written by the controller at the
end of the run; a run of some files updates theirs only). A group that it
does not know yet (a new file) is given the upper quartile of the known ones,
so that it starts early rather than last.
The tests of a group keep their own order (some rely on it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import quantiles

import pytest

#: Markers whose tests form one group each, whatever their file.
SHARED_GROUPS = ("slurm", "nspawn")

#: Measured seconds per group of one whole run (set-up, call and tear-down).
DURATIONS_PATH = Path(__file__).parent / "durations.json"


def group_of(item: pytest.Item) -> str:
    """Return the ``xdist_group`` name of ``item`` ("" when it has none)."""
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return ""
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", ""))


def plan_group(item: pytest.Item) -> str:
    """Return the group ``item`` belongs to: ``slurm``, ``nspawn``, else its file."""
    for shared in SHARED_GROUPS:
        if item.get_closest_marker(shared):
            return shared
    return item.nodeid.split("::")[0]


def plan_order(groups: list[str], seconds: dict[str, float]) -> dict[str, int]:
    """Return each group's rank: the longest first, unknown ones at the upper quartile (pure).

    ``groups`` in their collection order (ties keep it); ``seconds`` as in
    :data:`DURATIONS_PATH`.
    """
    known = sorted(seconds.values())
    unknown_s = quantiles(known, n=4)[2] if len(known) >= 2 else 0.0
    first_seen = {group: index for index, group in enumerate(dict.fromkeys(groups))}
    ranked = sorted(first_seen, key=lambda g: (-seconds.get(g, unknown_s), first_seen[g]))
    return {group: rank for rank, group in enumerate(ranked)}


def load_durations(path: Path = DURATIONS_PATH) -> dict[str, float]:
    """Return ``{group: seconds}`` from ``path`` ({} when missing or unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-durations",
        action="store_true",
        help=f"write each test group's seconds of this run to {DURATIONS_PATH.name}",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its group, then, in a pytest-xdist worker, order the groups.

    Without xdist the marker is inert and the order stays. ``tryfirst``:
    pytest-xdist's worker reads the markers in its own
    ``pytest_collection_modifyitems`` (``xdist/remote.py``), so they must be on
    the items before it runs; the worker's order is the one the controller
    schedules by.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        item.add_marker(pytest.mark.xdist_group(plan_group(item)))
    if hasattr(config, "workerinput"):
        order_items(items)


def order_items(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place: groups longest first, each group's tests in their order."""
    rank = plan_order([group_of(item) for item in items], load_durations())
    position = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (rank[group_of(item)], position[id(item)]))


_measured: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist the controller receives every worker's reports, whose node
    # ids end in "@<group>"; a serial run has no groups to measure.
    if "@" in report.nodeid:
        _measured[report.nodeid.rsplit("@", 1)[1]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not session.config.getoption("store_durations") or not _measured:
        return
    if hasattr(session.config, "workerinput"):  # a worker: the controller writes
        return
    seconds = {**load_durations(), **{g: round(s, 1) for g, s in _measured.items()}}
    text = json.dumps(dict(sorted(seconds.items())), indent=1)
    DURATIONS_PATH.write_text(text + "\n", encoding="utf-8")
