"""``coursehub pendulum pipeline``: generate, train through the runner, evaluate."""

import argparse
import json

import pytest

from coursehub.cli import build_parser
from coursehub.errors import CoursehubError, UsageError
from coursehub.usecases import pendulum_pipeline as pipeline


@pytest.fixture
def runner_env(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSEHUB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("COURSEHUB_SLOTS_DIR", str(tmp_path / "slots"))
    monkeypatch.setenv("COURSEHUB_CPU_BUDGET", "1")
    return tmp_path / "runs"


def tiny_args(out_dir, **overrides):
    values = {"out_dir": out_dir, "n_trajectories": 10, "epochs": 1, "threads": 1}
    values.update({"max_windows": 200, "seed": 0, **overrides})
    return argparse.Namespace(**values)


def test_train_args_follow_the_course_interface(tmp_path):
    argv = pipeline.plan_train_args(tmp_path, tiny_args(tmp_path, epochs=3), 2)
    assert argv[:3] == [str(tmp_path / "model.pt"), "3", "2"]
    assert argv[argv.index("--data") + 1] == str(tmp_path / "pendulum.npz")
    assert argv[argv.index("--max-windows") + 1] == "200"
    assert "--max-windows" not in pipeline.plan_train_args(
        tmp_path, tiny_args(tmp_path, max_windows=None), 2
    )


@pytest.mark.slow
def test_pipeline_trains_through_the_runner(tmp_path, runner_env, capsys):
    out = tmp_path / "demo"
    assert pipeline.run(tiny_args(out)) == 0
    printed = capsys.readouterr().out
    assert "[coursehub] exit 0 | elapsed " in printed and " | 1 thread | " in printed
    assert (out / "model.pt").is_file() and (out / "evaluation.png").is_file()
    assert json.loads((out / "metrics.json").read_text())["model"]["epoch"] == 1
    (log,) = runner_env.glob("*-pendulum-train-*.log")
    assert "samples/s" in log.read_text()
    (result,) = runner_env.glob("*-pendulum-train-*.json")
    assert json.loads(result.read_text())["n_threads"] == 1


def test_failed_training_names_its_log(tmp_path, runner_env, monkeypatch):
    def bad_args(out_dir, args, n_threads):
        return ["--no-such-option"]

    monkeypatch.setattr(pipeline, "plan_train_args", bad_args)
    with pytest.raises(CoursehubError, match=r"exit status 2\): see .*pendulum-train.*\.log"):
        pipeline.run(tiny_args(tmp_path / "demo"))
    assert not (tmp_path / "demo" / "model.pt").exists()


def test_more_threads_than_the_budget_is_refused_before_training(tmp_path, runner_env):
    with pytest.raises(UsageError, match="COURSEHUB_CPU_BUDGET"):
        pipeline.train_through_runner(tmp_path, tiny_args(tmp_path), 2)
    assert not runner_env.exists() or not any(runner_env.iterdir())


def test_the_pendulum_command_runs_the_pipeline_from_its_new_home(tmp_path):
    args = build_parser().parse_args(["pendulum", "pipeline", "--out-dir", str(tmp_path)])
    assert args.out_dir == tmp_path and args.n_trajectories == 60
    with pytest.raises(UsageError, match="--n-trajectories=3 is too small"):
        args.func(build_parser().parse_args(["pendulum", "pipeline", "--n-trajectories", "3"]))
