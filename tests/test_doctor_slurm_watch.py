"""``coursehub doctor``: ``PrivateData=jobs`` that hides the students' jobs from the hub's watch.

The hub's job watch (coursehub.spawn.slurmwatch) runs ``squeue`` as the hub's
user; where slurm.conf sets ``PrivateData=jobs`` and that user is not
privileged it lists no student's job, and a dead server waits for the 8-s
poll. The live case reads the test cluster's real ``scontrol show config``.
"""

from __future__ import annotations

import pytest

from coursehub.doctor.slurmjobs import check_slurm_watch, parse_config, plan_watch_check

#: Lines as ``scontrol show config`` prints them (Slurm 22.05).
SHOWN = """Configuration data as of 2026-12-04T23:35:10
PrivateData             = jobs,usage
SlurmUser               = slurm(64030)
SchedulerParameters     = sched_interval=1
"""


def test_the_config_lines_become_keys_and_values():
    config = parse_config(SHOWN)
    assert config["PrivateData"] == "jobs,usage"
    assert config["SlurmUser"] == "slurm(64030)"
    assert config["SchedulerParameters"] == "sched_interval=1"


@pytest.mark.parametrize(
    ("private", "user", "level"),
    [
        ("none", "jupyterhub", "ok"),
        ("usage,accounts", "jupyterhub", "ok"),
        ("jobs,usage", "root", "ok"),
        ("jobs", "slurm", "ok"),  # SlurmUser
        ("accounts,JOBS", "jupyterhub", "warn"),
    ],
)
def test_hidden_jobs_warn_only_for_an_unprivileged_hub_user(private, user, level):
    config = {"PrivateData": private, "SlurmUser": "slurm(64030)"}
    assert plan_watch_check(config, user).level == level


def test_the_warning_names_the_user_the_fallback_and_the_fix():
    result = plan_watch_check(parse_config(SHOWN), "jupyterhub")
    assert result.name == "slurm-watch"
    assert "PrivateData=jobs hides the students' jobs from jupyterhub" in result.line
    assert "periodic poll (8 s)" in result.line
    assert "sacctmgr modify user jupyterhub set AdminLevel=Operator" in result.line


@pytest.mark.slurm
@pytest.mark.integration
def test_the_test_cluster_hides_no_job(slurm_cluster):
    result = check_slurm_watch()
    assert result.level == "ok", result
