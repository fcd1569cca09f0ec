"""bench_server_exit's choice of spawners and its summary (coursehub.bench.serverexit)."""

from __future__ import annotations

import pytest

from coursehub.bench.serverexit import ExitVariant, plan_exit_variants, summarise_exit_times


def test_as_root_with_slurm_every_spawner_but_systemd_runs():
    variants = plan_exit_variants(is_root=True, systemd_pid1=False, slurm_missing="")
    assert [v.name for v in variants if not v.skipped] == ["jupyterhub", "cgroup", "slurm"]
    assert variants[2] == ExitVariant("systemd", "systemd is not PID 1 on this machine")


def test_without_root_or_slurm_the_reasons_are_given():
    variants = plan_exit_variants(False, True, "Slurm not installed", ["cgroup", "slurm"])
    assert [(v.name, v.skipped) for v in variants] == [
        ("cgroup", "not root: the cgroup spawner makes no cgroups"),
        ("slurm", "Slurm not installed"),
    ]


def test_an_unknown_spawner_is_refused():
    with pytest.raises(ValueError, match="kube"):
        plan_exit_variants(True, False, "", ["kube"])


def test_the_summary_counts_the_runs_within_10_s():
    lines = summarise_exit_times("slurm", [2.0, 3.0, 9.0], [8.0, 12.5, 9.9], [5.0, 9.0, 0.5])
    assert lines[0].startswith("     slurm  reload says stopped : median 3 s")
    assert "working server again: median 9.9 s" in lines[1]
    assert "of which the start : median 5 s" in lines[2]
    assert lines[3] == "     slurm  working within 10 s: 2 of 3 runs"
    assert summarise_exit_times("cgroup", [], []) == ["    cgroup  no run finished"]
