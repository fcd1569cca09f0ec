"""DP-Buffat-v2 (10-s forecasts, intervals over test trajectories) and the class preset."""

import argparse
import json
import math

import numpy as np
import pytest

from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.pendulum import metrics, train, trainsettings
from coursehub.pendulum.checkpoint import load_checkpoint
from coursehub.pendulum.config import RUN_PRESETS, ModelConfig, run_preset
from coursehub.pendulum.datafile import save_dataset
from coursehub.pendulum.dataset import generate_dataset
from coursehub.pendulum.evaluate import render_interval_table, render_table
from coursehub.pendulum.plots import plan_typical
from helpers import assert_matches_golden

TINY = ["--max-windows", "256", "--hidden-size", "16", "--trajectories", "8", "--no-progress"]


def test_v1_is_unchanged_and_v2_forecasts_ten_seconds():
    assert (metrics.CONTEXT, metrics.HORIZON, metrics.NRMSE_STEPS) == (10, 100, (1, 10, 50, 100))
    assert metrics.V1.horizon == 100 and not metrics.V1.intervals
    assert metrics.benchmark(1) is metrics.V1 and metrics.benchmark(2) is metrics.V2
    v2 = metrics.V2
    assert v2.name == "DP-Buffat-v2" and v2.context == 10 and v2.intervals
    assert v2.horizon / 30 == pytest.approx(10.0)
    assert dict(v2.nrmse_points) == {"nrmse_1": 1, "nrmse_1s": 30, "nrmse_5s": 150}
    with pytest.raises(UsageError, match="unknown benchmark version 3"):
        metrics.benchmark(3)


def test_v2_starts_leave_room_for_ten_seconds():
    offsets = metrics.plan_starts(751, 5, metrics.HORIZON_V2)
    assert offsets[0] == 0 and offsets[-1] == 751 - 310 and len(offsets) == 5
    assert len(metrics.plan_starts(309, 5, metrics.HORIZON_V2)) == 0
    assert list(metrics.plan_starts(751, 5)) == list(metrics.plan_starts(751, 5, 100))


def test_vpt_in_v2_is_measured_up_to_ten_seconds():
    curve = np.zeros((2, 300))
    curve[0, 149:] = 1.0  # leaves the band at step 150, 5 s
    vpt = metrics.valid_prediction_time(curve, 1 / 30)
    np.testing.assert_allclose(vpt, [5.0, 10.0])


def fake_scores(n_traj=6, per=5, horizon=300, seed=0):
    rng = np.random.default_rng(seed)
    n = n_traj * per
    return {
        "nrmse": rng.uniform(0, 1, (n, horizon)),
        "vpt_s": rng.uniform(0, 10, n),
        "energy_drift": rng.uniform(0, 0.1, n),
    }, np.repeat(np.arange(n_traj), per)


def test_v1_summaries_keep_their_keys_and_v2_adds_intervals():
    scores, traj = fake_scores()
    energy = np.where(traj % 2 == 0, 0.1, 0.9)[:]
    v1 = metrics.summarize({**scores, "nrmse": scores["nrmse"][:, :100]}, energy)
    assert list(v1["all"]) == [
        "n_starts",
        "nrmse_1",
        "nrmse_10",
        "nrmse_50",
        "nrmse_100",
        "vpt_s",
        "vpt_lyapunov",
        "energy_drift",
    ]
    assert set(v1["all"]["vpt_s"]) == {"median", "mean"}
    v2 = metrics.summarize(scores, energy, metrics.V2, traj)
    assert set(v2["chaotic"]) >= {"nrmse_1", "nrmse_1s", "nrmse_5s", "vpt_s", "vpt_capped"}
    cell = v2["chaotic"]["vpt_s"]
    assert cell["low"] <= cell["median"] <= cell["high"]
    assert v2["chaotic"]["vpt_lyapunov"]["median"] == pytest.approx(
        cell["median"] * metrics.LYAPUNOV_EXPONENT
    )
    with pytest.raises(UsageError, match="trajectory of each start"):
        metrics.summarize(scores, energy, metrics.V2)


def test_vpt_capped_counts_the_starts_that_never_leave_the_band():
    scores, traj = fake_scores(n_traj=2, per=2)
    scores["nrmse"][:] = 0.1
    scores["nrmse"][0, 5] = 0.9
    summary = metrics.summarize(scores, np.full(4, 0.9), metrics.V2, traj)
    assert summary["chaotic"]["vpt_capped"] == pytest.approx(0.75)


def test_median_interval_resamples_trajectories_and_is_reproducible():
    values = np.repeat([1.0, 2.0, 3.0, 4.0], 3)
    traj = np.repeat([7, 3, 9, 5], 3)
    low, high = metrics.median_interval(values, traj)
    assert (low, high) == metrics.median_interval(values, traj)
    assert 1.0 <= low <= np.median(values) <= high <= 4.0
    # one trajectory: nothing to resample, the interval is the median itself
    assert metrics.median_interval([2.0, 2.0], [0, 0]) == (2.0, 2.0)
    assert all(math.isnan(v) for v in metrics.median_interval([], []))
    # trajectories with unequal numbers of starts take the general path
    low, high = metrics.median_interval([1.0, 2.0, 2.0, 3.0, 3.0, 3.0], [0, 1, 1, 2, 2, 2])
    assert 1.0 <= low <= high <= 3.0


def test_the_v2_table_renders_medians_with_intervals():
    scores, traj = fake_scores(seed=1)
    energy = np.where(traj < 3, 0.1, 0.9)
    summary = {
        name: metrics.summarize(
            {**scores, "vpt_s": scores["vpt_s"] / (i + 1)}, energy, metrics.V2, traj
        )
        for i, name in enumerate(("model", "persistence", "ridge_ar10"))
    }
    text = render_table(summary)
    assert text == render_interval_table(summary)
    assert_matches_golden(text + "\n", "pendulum_v2_table.txt.golden")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("v2")
    data, model = folder / "pendulum.npz", folder / "model.pt"
    save_dataset(generate_dataset(20, seed=4, duration_s=11.0, progress=False), data)
    assert train.main([str(model), "1", "1", "--data", str(data), *TINY]) == 0
    return data, model


def test_evaluate_version_2_writes_ten_second_figures(trained, tmp_path, capsys):
    data, model = trained
    out_json, out_png = tmp_path / "m.json", tmp_path / "p.png"
    argv = ["pendulum", "evaluate", str(model), "--data", str(data), "--version", "2"]
    assert main([*argv, "--json", str(out_json), "--plot", str(out_png)]) == 0
    doc = json.loads(out_json.read_text())
    assert doc["benchmark"] == "DP-Buffat-v2" and doc["horizon"] == 300
    assert len(doc["nrmse_median_curve"]["model"]) == 300
    vpt = doc["metrics"]["model"]["all"]["vpt_s"]
    assert vpt["low"] <= vpt["median"] <= vpt["high"] <= 10.0 + 1e-9
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "nrmse_5s" in out and "95% bootstrap interval" in out


def test_evaluate_version_2_refuses_trajectories_shorter_than_ten_seconds(tmp_path, capsys):
    data = tmp_path / "short.npz"
    save_dataset(generate_dataset(20, seed=4, duration_s=5.0, progress=False), data)
    model = tmp_path / "model.pt"
    assert train.main([str(model), "1", "1", "--data", str(data), *TINY]) == 0
    capsys.readouterr()
    argv = ["pendulum", "evaluate", str(model), "--data", str(data), "--version", "2"]
    assert main(argv) == 2
    assert "at least 310 samples" in capsys.readouterr().err


def parse_train(*argv):
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    return parser.parse_args([str(a) for a in argv])


def test_the_class_preset_fills_every_option_left_out():
    preset = run_preset("class")
    assert preset.n_threads == 2 and preset.budget_s == 60
    request = train.plan_request(parse_train("m.pt", 3, 2, "--preset", "class"))
    model, cfg, trajectories = trainsettings.plan_configs(request.n_epochs, request.given)
    assert model == preset.model
    assert cfg.batch_size == preset.train.batch_size and cfg.lr == preset.train.lr
    assert cfg.max_windows == preset.train.max_windows and cfg.n_epochs == 3
    assert trajectories == preset.trajectories


def test_a_preset_gives_its_epochs_and_threads_when_they_are_left_out():
    preset = run_preset("class")
    request = train.plan_request(parse_train("m.pt", "--preset", "class"))
    assert (request.n_epochs, request.n_threads) == (preset.train.n_epochs, preset.n_threads)
    request = train.plan_request(parse_train("m.pt", 6, "--preset", "class"))
    assert (request.n_epochs, request.n_threads) == (6, preset.n_threads)


def test_without_a_preset_the_epochs_and_threads_are_required():
    with pytest.raises(UsageError, match="N_EPOCHS and N_THREADS: required unless --preset"):
        train.plan_request(parse_train("m.pt"))
    with pytest.raises(UsageError, match=r"^N_THREADS: required"):
        train.plan_request(parse_train("m.pt", 3))


def test_the_evaluate_help_names_both_benchmark_versions(capsys):
    with pytest.raises(SystemExit):
        main(["pendulum", "--help"])
    assert "DP-Buffat-v1 or -v2" in capsys.readouterr().out


def test_an_option_given_beside_a_preset_wins():
    request = train.plan_request(parse_train("m.pt", 1, 2, "--preset", "class", "--layers", "2"))
    model, _, _ = trainsettings.plan_configs(request.n_epochs, request.given)
    assert model.n_layers == 2 and model.hidden_size == run_preset("class").model.hidden_size


def test_a_preset_of_another_architecture_is_refused():
    with pytest.raises(UsageError, match="leave --arch course out"):
        train.plan_request(parse_train("m.pt", 1, 2, "--preset", "class", "--arch", "course"))
    with pytest.raises(UsageError, match="unknown preset"):
        run_preset("lecture")


def test_help_shows_the_class_preset(capsys):
    with pytest.raises(SystemExit):
        train.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--preset {class}" in out
    assert "sized for 60 s of training on 2 threads" in out


def test_a_class_run_resumes_with_its_preset(tmp_path, capsys):
    data, model = tmp_path / "pendulum.npz", tmp_path / "class.pt"
    save_dataset(generate_dataset(20, seed=4, duration_s=4.0, progress=False), data)
    small = ["--max-windows", "128", "--trajectories", "4", "--hidden-size", "8", "--no-progress"]
    common = ["--data", str(data), "--preset", "class", *small]
    assert train.main([str(model), "1", "1", *common]) == 0
    assert train.main([str(model), "2", "1", "--resume", *common]) == 0
    ckpt = load_checkpoint(model)
    assert ckpt["epoch"] == 2 and ckpt["train_config"]["lr"] == run_preset("class").train.lr
    assert ckpt["data"]["trajectories"] == 4
    # a checkpoint of another run refuses the preset's settings on resume
    other = tmp_path / "other.pt"
    assert train.main([str(other), "1", "1", "--data", str(data), *small]) == 0
    capsys.readouterr()
    resume = [str(other), "2", "1", "--data", str(data), "--resume", "--preset", "class"]
    assert train.main([*resume, *small[4:]]) == 2
    assert "--resume" in capsys.readouterr().err


def test_every_run_preset_is_a_valid_lstm_run():
    for name, preset in RUN_PRESETS.items():
        assert preset.name == name and isinstance(preset.model, ModelConfig)
        assert preset.train.n_epochs >= 1 and preset.n_threads >= 1 and preset.budget_s > 0
        assert name in preset.describe()


def test_the_v2_figure_draws_a_typical_start_of_each_regime():
    energy = np.array([0.1, 0.1, 0.1, 0.9, 0.9, 0.9, 0.3])
    vpt = np.array([1.0, 5.0, 9.0, 0.5, 2.0, 2.1, 4.0])
    assert plan_typical(energy, vpt) == [1, 4]
    assert plan_typical(np.array([0.9]), np.array([1.0])) == [0]
