"""Array tasks for real: each grades its share into its own gradebook, merged into the course's.

The first test runs the task module here, as Slurm would run each task
(``SLURM_ARRAY_TASK_ID``), and compares the merged course gradebook with a
local batch's; the second submits the array to the real single-node Slurm
(tests/slurmfixture.py).
"""

from __future__ import annotations

import pytest

from coursehub.grading.assignments import collect
from coursehub.grading.autograde import arraytask
from coursehub.grading.autograde.arraybatch import ArrayBatch
from coursehub.grading.autograde.batch import autograde_assignment
from coursehub.grading.autograde.gradebook import ensure_students
from coursehub.grading.autograde.job import AutogradeLimits, job_log_path
from coursehub.grading.export import read_grade_table
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from coursehub.runner.slurm.backend import SlurmBackend
from coursehub.runner.slurm.plan import SlurmPlacement
from test_grading_e2e import CORRECT, PS, answer, new_course

pytestmark = pytest.mark.slow

ROSTER = ["alice", "bob", "erin"]
LIMITS = AutogradeLimits(n_threads=1, mem_limit=2**30, timeout_s=60)
EXPECTED = {"alice": ("graded", 4.0), "bob": ("graded", 0.0), "erin": ("graded", 4.0)}


def three_submissions(root):
    layout = new_course(root, "phys-2025", execute_timeout_s=30)
    answer(layout, root, "alice", CORRECT)
    answer(layout, root, "bob", "    return 0.0 * theta1")
    answer(layout, root, "erin", CORRECT)
    collect(layout, PS)
    return layout


def outcomes_by(outcomes):
    return {o.student_id: (o.status, o.score) for o in outcomes}


def test_two_task_gradebooks_merged_give_the_scores_of_a_local_batch(
    sandbox_user, tmp_path, monkeypatch
):
    monkeypatch.setenv("COURSEHUB_GRADING_ARRAY_SHARE", "2")
    local_layout = three_submissions(tmp_path / "local")
    backend = LocalBackend(tmp_path / "runs", SlotPool(tmp_path / "slots", 2), use_cgroups=False)
    local = autograde_assignment(local_layout, PS, ROSTER, LIMITS, backend)
    layout = three_submissions(tmp_path / "array")
    ensure_students(layout, ROSTER)
    batch = ArrayBatch(layout, PS, LIMITS, None, 2, None)
    batch.manifest = batch.write_manifest(ROSTER)
    assert batch.manifest.shares == (("alice", "bob"), ("erin",))
    batch.job_id = "40"
    for index in (0, 1):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(index))
        manifest = str(batch.manifest.folder / "manifest.json")
        assert arraytask.main(["--manifest", manifest]) == 0
        graded_here = {o.student_id for o in batch.outcomes}
        # the task's grades reach the course's gradebook only by the merge
        for row in read_grade_table(layout).rows:
            assert row.student_id in graded_here or row.scores == (None,)
        batch.collect_task(index, "COMPLETED")
        assert not (batch.manifest.task_dir(index) / "gradebook.db").exists()  # merged
    assert outcomes_by(batch.outcomes) == outcomes_by(local) == EXPECTED
    assert read_grade_table(layout).rows == read_grade_table(local_layout).rows
    assert job_log_path(layout, PS, "erin").is_file()  # beside a local batch's logs
    # a task that never ran: its submissions are errors naming it, graded again next time
    gone = ArrayBatch(layout, PS, LIMITS, None, 2, None)
    gone.manifest, gone.job_id = gone.write_manifest(["erin"]), "41"
    gone.collect_task(0, "CANCELLED")
    (erin,) = gone.outcomes
    assert erin.status == "error"
    assert "array task 0 of Slurm job 41 ended CANCELLED" in erin.message


@pytest.mark.slurm
def test_on_slurm_a_batch_is_one_job_array_and_its_merged_scores_are_the_local_ones(
    slurm_cluster, sandbox_user, tmp_path, monkeypatch
):
    monkeypatch.setenv("COURSEHUB_GRADING_ARRAY_SHARE", "2")
    layout = three_submissions(tmp_path)
    backend = SlurmBackend(SlurmPlacement(partition=slurm_cluster.partition), tmp_path / "runs")
    outcomes = autograde_assignment(layout, PS, ROSTER, LIMITS, backend, parallel=2)
    assert outcomes_by(outcomes) == EXPECTED, [o.message for o in outcomes]
    (folder,) = layout.reports_dir.glob(f"array-{PS}-*")
    assert sorted(p.name for p in folder.glob("task-*.log")) == ["task-0.log", "task-1.log"]
    assert list(folder.rglob("*.db")) == []  # every gradebook copy merged, then removed
    # each task graded in a worker whose kernels were forked from its fork server
    assert "forked" in job_log_path(layout, PS, "alice").read_text()
    assert "forked" in job_log_path(layout, PS, "erin").read_text()
    scores = {row.student_id: row.scores for row in read_grade_table(layout).rows}
    assert scores == {"alice": (4.0,), "bob": (0.0,), "erin": (4.0,)}
