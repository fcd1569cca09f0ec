"""Which spawners ``benchmarks/bench_server_exit.py`` can run here, and its summary (pure).

The benchmark times how soon a student whose server was killed (``kill -9``)
gets a working server again, per spawner; the target is 10 s (issue #32,
"A server or the hub that died"). :func:`plan_exit_variants` says which
spawners this machine can run and why not the others;
:func:`summarise_exit_times` writes the median, its interval and how many
runs met the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coursehub.bench.stats import describe_median

#: Seconds within which a killed server must be working again.
TARGET_S = 10.0
#: Every variant, in the order they are reported.
VARIANT_NAMES = ("jupyterhub", "cgroup", "systemd", "slurm")


@dataclass(frozen=True)
class ExitVariant:
    """One spawner of the benchmark: its name, and why it is skipped ("" if it runs)."""

    name: str
    skipped: str = ""


def plan_exit_variants(
    is_root: bool, systemd_pid1: bool, slurm_missing: str, wanted: Sequence[str] = VARIANT_NAMES
) -> list[ExitVariant]:
    """Return the ``wanted`` variants, each runnable or with the reason it is not.

    Parameters
    ----------
    is_root
        The benchmark runs as root: the cgroup spawner makes real cgroups.
    systemd_pid1
        systemd is PID 1 on this machine.
    slurm_missing
        Why no Slurm cluster can be used ("" if one runs or can be started).
    wanted
        Names among :data:`VARIANT_NAMES`.

    Raises
    ------
    ValueError
        For a name not in :data:`VARIANT_NAMES`.
    """
    unknown = sorted(set(wanted) - set(VARIANT_NAMES))
    if unknown:
        raise ValueError(f"unknown spawner(s) {', '.join(unknown)}; known: {VARIANT_NAMES}")
    reasons = {
        "jupyterhub": "",
        "cgroup": "" if is_root else "not root: the cgroup spawner makes no cgroups",
        "systemd": (
            "SystemdSpawner needs one Unix account per student; not run by this benchmark"
            if systemd_pid1
            else "systemd is not PID 1 on this machine"
        ),
        "slurm": slurm_missing,
    }
    return [ExitVariant(name, reasons[name]) for name in VARIANT_NAMES if name in wanted]


def summarise_exit_times(
    name: str,
    noticed_s: Sequence[float],
    working_s: Sequence[float],
    spawn_s: Sequence[float] = (),
    target_s: float = TARGET_S,
) -> list[str]:
    """Return the report lines of one variant (pure).

    The median and 95 % interval of the seconds from the kill until a reload
    says the server stopped and until a working server again
    (:func:`coursehub.bench.stats.describe_median`), of the new server's
    start alone (Start to ready, ``spawn_s``, when given: what the machine's
    load adds), and how many runs had a working server within ``target_s``.
    No runs: one line saying so.
    """
    if not working_s:
        return [f"{name:>10}  no run finished"]
    within = sum(1 for s in working_s if s <= target_s)
    lines = [
        describe_median(f"{name:>10}  reload says stopped ", noticed_s, " s"),
        describe_median(f"{name:>10}  working server again", working_s, " s"),
    ]
    if spawn_s:
        lines.append(describe_median(f"{name:>10}  of which the start ", spawn_s, " s"))
    lines.append(f"{name:>10}  working within {target_s:g} s: {within} of {len(working_s)} runs")
    return lines
