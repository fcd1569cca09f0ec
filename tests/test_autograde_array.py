"""A batch as one Slurm job array: shares, batch script, task states, gradebook merge, live run."""

from __future__ import annotations

import pytest

from coursehub.errors import CoursehubError, UsageError
from coursehub.grading.autograde.arrayplan import (
    array_finished,
    parse_array_states,
    pending_reasons,
    plan_missing,
    plan_shares,
    render_array_option,
    render_array_script,
    share_size,
)
from coursehub.grading.autograde.arraytask import ArrayManifest, task_index
from coursehub.grading.autograde.job import AutogradeLimits
from coursehub.grading.layout import make_layout
from coursehub.runner.api import make_spec
from coursehub.runner.slurm.plan import SlurmPlacement


def test_shares_are_in_order_and_differ_in_size_by_at_most_one():
    assert plan_shares(["a", "b", "c"], 2) == (("a", "b"), ("c",))
    assert plan_shares(list("abcde"), 4) == (("a", "b", "c"), ("d", "e"))
    assert plan_shares(list("abcdefgh"), 8) == (tuple("abcdefgh"),)
    assert plan_shares(list("abc"), 1) == (("a",), ("b",), ("c",))
    assert plan_shares([], 3) == ()
    with pytest.raises(UsageError, match="at least 1"):
        plan_shares(["a"], 0)


def test_the_share_setting_is_a_whole_number_of_at_least_one():
    assert share_size({}) == 8
    assert share_size({"COURSEHUB_GRADING_ARRAY_SHARE": " 3 "}) == 3
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(UsageError, match="COURSEHUB_GRADING_ARRAY_SHARE"):
            share_size({"COURSEHUB_GRADING_ARRAY_SHARE": bad})


def test_the_array_option_throttles_only_below_the_number_of_tasks():
    assert render_array_option(5, 2) == "--array=0-4%2"
    assert render_array_option(5, 5) == "--array=0-4"
    assert render_array_option(5, None) == "--array=0-4"
    assert render_array_option(1, 1) == "--array=0-0"
    with pytest.raises(UsageError):
        render_array_option(0, None)
    with pytest.raises(UsageError):
        render_array_option(3, 0)


def test_the_array_script_runs_the_task_module_with_the_tasks_limits_and_no_inherited_env():
    spec = make_spec(
        "coursehub.grading.autograde.arraytask",
        module=True,
        env={"PATH": "/usr/bin", "PYTHONSAFEPATH": "1"},
        inherit_env=False,
        name="autograde-ps1",
        n_threads=2,
        mem_limit=2**30,
        timeout_s=600,
        cwd="/srv/courses/phys",
    )
    script = render_array_script(
        spec,
        SlurmPlacement(partition="debug"),
        "/srv/courses/phys/coursehub/array-ps1-x/task-%a.log",
        "--array=0-2%2",
        "/srv/courses/phys/coursehub/array-ps1-x/manifest.json",
        python="/opt/venv/bin/python",
    )
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for option in (
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem=1024M",
        "#SBATCH --time=11",
        "#SBATCH --partition=debug",
        "#SBATCH --chdir=/srv/courses/phys",
        "#SBATCH --export=NONE",
        "#SBATCH --array=0-2%2",
        "#SBATCH --output=/srv/courses/phys/coursehub/array-ps1-x/task-%a.log",
        "export PATH=/usr/bin",
        "export OMP_NUM_THREADS=2",
    ):
        assert option in lines, option
    assert lines[-1] == (
        "exec /opt/venv/bin/python -m coursehub.grading.autograde.arraytask "
        "--manifest /srv/courses/phys/coursehub/array-ps1-x/manifest.json"
    )


SCONTROL = (
    "JobId=41 ArrayJobId=40 ArrayTaskId=1 JobName=autograde-ps1 JobState=COMPLETED Reason=None\n"
    "JobId=40 ArrayJobId=40 ArrayTaskId=0 JobName=autograde-ps1 JobState=FAILED Reason=NonZero\n"
    "JobId=42 ArrayJobId=40 ArrayTaskId=2-4%2 JobName=autograde-ps1 JobState=PENDING "
    "Reason=JobArrayTaskLimit\n"
)


def test_task_states_are_read_per_task_and_a_pending_range_keeps_the_array_running():
    states = parse_array_states(SCONTROL)
    assert states == {"1": "COMPLETED", "0": "FAILED", "2-4%2": "PENDING"}
    assert not array_finished(states)
    assert array_finished({"0": "FAILED", "1": "COMPLETED"})
    assert not array_finished({"0": "RUNNING", "1": "COMPLETED"})
    assert parse_array_states("JobId=7 JobState=RUNNING\n") == {}
    assert [r["Reason"] for r in pending_reasons(SCONTROL)] == ["JobArrayTaskLimit"]


def test_a_failed_task_names_itself_its_state_and_its_missing_submissions():
    missing = plan_missing("40", 0, ["alice", "bob"], "FAILED", ["alice"], "coursehub: no sandbox")
    assert missing == {
        "bob": "not graded: array task 0 of Slurm job 40 ended FAILED (coursehub: no sandbox); "
        "run the same command again"
    }
    gone = plan_missing("40", 3, ["carol"], "", [])
    assert gone["carol"].startswith("not graded: array task 3 of Slurm job 40 ended (Slurm no")
    assert plan_missing("40", 1, ["dan"], "COMPLETED", ["dan"]) == {}


def test_the_manifest_reads_back_what_was_written_and_a_task_knows_its_share(tmp_path):
    layout = make_layout("phys-2025", tmp_path / "courses", tmp_path / "exchange")
    manifest = ArrayManifest(
        layout, "ps1", AutogradeLimits(2, 2**30, 60.0), (("a", "b"), ("c",)), tmp_path, True
    )
    assert ArrayManifest.from_json(manifest.to_json()) == manifest
    assert task_index({"SLURM_ARRAY_TASK_ID": "1"}, 2) == 1
    for bad in ({}, {"SLURM_ARRAY_TASK_ID": "2"}, {"SLURM_ARRAY_TASK_ID": "x"}):
        with pytest.raises(CoursehubError, match="SLURM_ARRAY_TASK_ID"):
            task_index(bad, 2)
    with pytest.raises(CoursehubError, match="not an autograde array manifest"):
        ArrayManifest.from_json('{"course": {}}')
