"""bench_exam_spawn's exam-server check, hub log reading and summary (coursehub.bench.examspawn)."""

from __future__ import annotations

import pytest

from coursehub.bench.examspawn import (
    ExamRound,
    exam_server_problem,
    home_is_exam_home,
    start_times_of_log,
    summarise_round,
    summarise_rounds,
)

EXAM = "mlmeca-2025/pendulum_energy"


def test_an_exam_server_has_the_exams_environment_root_folder_and_notebook(tmp_path):
    home = tmp_path / "p2501001"
    env = {"COURSEHUB_EXAM": EXAM, "JUPYTERHUB_ROOT_DIR": str(home), "HOME": "/srv/homes/p"}
    assert "notebook" in exam_server_problem(env, home, EXAM, "pendulum_energy.ipynb")
    (home / EXAM).mkdir(parents=True)
    (home / EXAM / "pendulum_energy.ipynb").write_text("{}")
    assert "HOME is '/srv/homes/p'" in exam_server_problem(env, home, EXAM, "pendulum_energy.ipynb")
    assert not home_is_exam_home(env, home)
    env["HOME"] = str(home)
    assert home_is_exam_home(env, home)
    assert exam_server_problem(env, home, EXAM, "pendulum_energy.ipynb") == ""
    assert "COURSEHUB_EXAM" in exam_server_problem({"HOME": str(home)}, home, EXAM, "x")
    other = {"COURSEHUB_EXAM": EXAM, "JUPYTERHUB_ROOT_DIR": "/srv/homes/p"}
    assert "root folder is '/srv/homes/p'" in exam_server_problem(other, home, EXAM, "x")
    assert exam_server_problem(None, home, EXAM, "x") == "no server process found"


def test_the_hubs_start_times_are_read_from_its_log():
    log = (
        "[I 22:31:02.120 JupyterHub base:1193] User p2501001 took 12.500 seconds to start\n"
        "[I 22:31:09.000 JupyterHub base:1193] User s0000001 took 20.250 seconds to start\n"
        "[I 22:31:10.000 JupyterHub base:1193] User mbuffat took 3.000 seconds to start\n"
    )
    assert start_times_of_log(log, ["p2501001", "s0000001"]) == {
        "p2501001": 12.5,
        "s0000001": 20.25,
    }


def round_of(ready, failures=0, requested=4):
    return ExamRound(requested, 2, 7, tuple(ready), failures, 0, (1.5, 2.5), (10.0, 30.0), 4.2)


def test_a_round_counts_the_servers_ready_within_a_minute_and_prints_its_figures():
    r = round_of([5.0, 20.0, 60.0, 75.5])
    assert r.ready_within() == 3
    text = "\n".join(summarise_round(r))
    assert "first 5.0 s, median 40.0 s, last 75.5 s" in text
    assert "within 60 s: 3" in text and "HTTP 429 answers 7" in text
    assert "(HOME not the exam home: 0)" in text
    assert "server CPU at start: median 2.0 s, total 4 s" in text


def test_the_summary_gives_medians_with_intervals_and_whether_the_target_was_met():
    rounds = [round_of([5.0, 50.0]), round_of([4.0, 30.0, 40.0, 59.0], requested=4)]
    lines = summarise_rounds(rounds)
    assert lines[0].startswith("first ready: median 4.5 s, 95 % interval")
    assert any(line.startswith("ready within 60 s: median 3") for line in lines)
    assert lines[-1] == "target (all 4 ready within 60 s): met in 1 of 2 repeats"
    assert summarise_rounds([round_of([], failures=4)])[0] == "no server ready in any repeat"
    with pytest.raises(ValueError):
        summarise_rounds([])
