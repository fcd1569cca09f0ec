import json
import math

import numpy as np
import pytest

from coursehub.cli import main
from coursehub.pendulum import metrics, train
from coursehub.pendulum.baselines import fit_ridge, persistence_rollout
from coursehub.pendulum.datafile import save_dataset
from coursehub.pendulum.dataset import generate_dataset
from coursehub.pendulum.physics import PendulumParams, integrate_rk4

SIGMA = np.array([1.0, 2.0, 1.0, 4.0])


def test_perfect_forecast_scores_zero():
    true = np.random.default_rng(0).normal(size=(3, 100, 4))
    s = metrics.score(true, true, SIGMA, 1 / 30, PendulumParams())
    assert np.all(s["nrmse"] == 0) and np.all(s["energy_drift"] == 0)
    np.testing.assert_allclose(s["vpt_s"], 100 / 30)


def test_angle_errors_are_wrapped():
    true = np.zeros((1, 5, 4))
    pred = true + np.array([2 * math.pi, 0.0, -6 * math.pi, 0.0])
    assert metrics.nrmse_curve(pred, true, SIGMA).max() < 1e-12
    np.testing.assert_allclose(
        metrics.state_error([[3.0, 0, 0, 0]], [[-3.0, 0, 0, 0]])[0, 0], 6.0 - 2 * math.pi
    )


def test_nrmse_is_normalised_by_sigma_and_averaged_over_components():
    true = np.zeros((1, 1, 4))
    pred = np.array([[[0.0, 2.0, 0.0, 0.0]]])  # one sigma in one of four components
    assert metrics.nrmse_curve(pred, true, SIGMA)[0, 0] == pytest.approx(0.5)


def test_vpt_is_first_step_above_threshold():
    curve = np.array([[0.1, 0.4, 0.6, 0.2], [0.1, 0.2, 0.3, 0.5]])
    np.testing.assert_allclose(metrics.valid_prediction_time(curve, 0.5), [1.5, 2.0])


def test_persistence_is_exact_on_a_trajectory_at_rest():
    rest = np.zeros((2, 110, 4))
    pred = persistence_rollout(rest[:, :10])
    s = metrics.score(pred, rest[:, 10:], SIGMA, 1 / 30, PendulumParams())
    assert pred.shape == (2, 100, 4) and np.all(s["nrmse"] == 0)


def test_energy_drift_is_relative_to_the_energy_range():
    p = PendulumParams()
    true = np.zeros((1, 1, 4))
    top = np.array([[[math.pi, 0.0, math.pi, 0.0]]])  # upright: e_top
    assert metrics.energy_drift(top, true, p)[0] == pytest.approx(1.0)


def test_groups_and_summary():
    energy_norm = np.array([0.1, 0.3, 0.5, 0.9])
    scores = {
        "nrmse": np.ones((4, 100)),
        "vpt_s": np.array([1.0, 2, 3, 4]),
        "energy_drift": np.zeros(4),
    }
    summary = metrics.summarize(scores, energy_norm)
    assert [summary[g]["n_starts"] for g in ("all", "regular", "chaotic")] == [4, 1, 2]
    assert summary["chaotic"]["vpt_s"] == {"median": 3.5, "mean": 3.5}
    assert summary["chaotic"]["vpt_lyapunov"]["mean"] == pytest.approx(3.5 * 0.85)
    assert set(summary["all"]) >= {"nrmse_1", "nrmse_10", "nrmse_50", "nrmse_100"}


def test_plan_starts_are_fixed_and_fit_the_horizon():
    offsets = metrics.plan_starts(751, 5)
    assert offsets[0] == 0 and offsets[-1] == 751 - 110 and len(offsets) == 5
    assert len(metrics.plan_starts(100, 5)) == 0


def test_ridge_beats_persistence_one_step_ahead():
    rng = np.random.default_rng(0)
    y0 = np.zeros((12, 4))
    y0[:, [0, 2]] = rng.uniform(-2, 2, (12, 2))
    states = integrate_rk4(y0, 1 / 30, 130, substeps=4)
    ridge = fit_ridge(states[:10])
    test = states[10:]
    ridge_err = metrics.nrmse_curve(ridge.rollout(test[:, :10], 5), test[:, 10:15], SIGMA)
    pers_err = metrics.nrmse_curve(persistence_rollout(test[:, :10], 5), test[:, 10:15], SIGMA)
    assert ridge_err[:, 0].mean() < 0.2 * pers_err[:, 0].mean()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    data, model = folder / "pendulum.npz", folder / "model.pt"
    save_dataset(generate_dataset(20, seed=4, duration_s=5.0, progress=False), data)
    argv = [
        str(model),
        "1",
        "1",
        "--data",
        str(data),
        "--max-windows",
        "256",
        "--hidden-size",
        "16",
        "--no-progress",
    ]
    assert train.main(argv) == 0
    return data, model


def test_evaluate_writes_json_and_png(trained, tmp_path, capsys):
    data, model = trained
    out_json, out_png = tmp_path / "m.json", tmp_path / "p.png"
    argv = [
        "pendulum",
        "evaluate",
        str(model),
        "--data",
        str(data),
        "--json",
        str(out_json),
        "--plot",
        str(out_png),
    ]
    assert main(argv) == 0
    doc = json.loads(out_json.read_text())
    assert set(doc["metrics"]) == {"model", "persistence", "ridge_ar10"}
    assert doc["metrics"]["model"]["all"]["n_starts"] == 2 * 5
    assert len(doc["nrmse_median_curve"]["ridge_ar10"]) == 100
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ridge_ar10" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"), [(["--arch", "course"], "holds a 'lstm' model"), ([], "corrupt")]
)
def test_evaluate_rejects_bad_checkpoints(trained, tmp_path, capsys, extra, message):
    data, model = trained
    if not extra:
        model = tmp_path / "bad.pt"
        model.write_bytes(b"garbage")
    out_json = tmp_path / "m.json"
    out_json.write_text("{}")
    argv = ["pendulum", "evaluate", str(model), "--data", str(data), "--json", str(out_json)]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert out_json.read_text() == "{}"
