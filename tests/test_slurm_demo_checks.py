"""`coursehub demo --spawner slurm` without a cluster; the pure parts of coursehub.demo.slurm."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from coursehub.cli import main
from coursehub.demo.slurm import (
    SlurmUnavailableError,
    check_slurm,
    leftover_job_ids,
    parse_job_ids,
    parse_ping,
    parse_usable_nodes,
)


@pytest.mark.parametrize(
    ("text", "up"),
    [
        ("Slurmctld(primary) at node1 is UP\n", True),
        ("Slurmctld(primary) at node1 is DOWN\n", False),
        ("Slurmctld(primary) at a is DOWN\nSlurmctld(backup) at b is UP\n", True),
        ("", False),
        ("scontrol: fatal: Could not establish a configuration source\n", False),
    ],
)
def test_a_controller_is_up_only_when_scontrol_ping_says_so(text, up):
    assert parse_ping(text) is up


@pytest.mark.parametrize(
    ("text", "usable"),
    [
        ("1 idle\n", 1),
        ("2 mixed\n1 allocated\n", 3),
        ("1 down*\n", 0),
        ("1 idle*\n1 drained\n", 0),
        ("1 completing\n3 idle~\n", 1),
        ("", 0),
    ],
)
def test_only_nodes_that_can_take_a_job_count(text, usable):
    assert parse_usable_nodes(text) == usable


@pytest.mark.parametrize(
    ("states", "ids"),
    [
        (['{"job_id": "12", "job_status": "RUNNING host"}'], ["12"]),
        (["{}", None, '{"job_id": ""}', "not json", "[1]"], []),
        (['{"job_id": "7"}', '{"job_id": "8; rm -rf /"}', '{"job_id": 9}'], ["7", "9"]),
    ],
)
def test_job_ids_are_read_from_batchspawner_states_and_nothing_else(states, ids):
    assert parse_job_ids(states) == ids


def test_leftover_jobs_are_those_the_hub_database_still_holds(tmp_path):
    db = tmp_path / "jupyterhub.sqlite"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE spawners (id INTEGER PRIMARY KEY, state TEXT)")
        rows = [(json.dumps({"job_id": "41"}),), (json.dumps({}),), (None,)]
        connection.executemany("INSERT INTO spawners (state) VALUES (?)", rows)
    assert leftover_job_ids(db) == ["41"]
    assert leftover_job_ids(tmp_path / "missing.sqlite") == []


def test_check_slurm_names_the_single_node_script_when_slurm_conf_is_missing(tmp_path):
    if not all(shutil.which(c) for c in ("sbatch", "scontrol", "sinfo", "squeue", "scancel")):
        pytest.skip("Slurm's client commands are not installed")
    with pytest.raises(SlurmUnavailableError, match="scripts/slurm-single-node start"):
        check_slurm({"PATH": "/usr/bin:/bin", "SLURM_CONF": str(tmp_path / "slurm.conf")})


def test_the_demo_refuses_slurm_without_a_cluster_and_touches_nothing(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such" / "slurm.conf"))
    data_dir = tmp_path / "data"
    status = main(["demo", "--spawner", "slurm", "--data-dir", str(data_dir)])
    assert status == 2
    error = capsys.readouterr().err
    assert "--spawner slurm" in error and "scripts/slurm-single-node start" in error
    assert "Traceback" not in error and not data_dir.exists()
