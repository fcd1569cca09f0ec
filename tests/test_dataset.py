"""Dataset generation, split, file format, windows and the ``generate`` command."""

import json
import subprocess
import sys

import numpy as np
import pytest

from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.pendulum.datafile import (
    ENERGY_TOLERANCE,
    FORMAT_VERSION,
    PendulumDataset,
    load_dataset,
    save_dataset,
)
from coursehub.pendulum.dataset import generate_dataset, make_windows, plan_split
from coursehub.pendulum.physics import energy


@pytest.fixture(scope="module")
def small():
    return generate_dataset(30, seed=1, duration_s=2.0, progress=False)


@pytest.fixture(scope="module")
def coarse():
    """A coarse integration (2 sub-steps over 5 s) so that some trajectories are flagged."""
    return generate_dataset(40, seed=1, duration_s=5.0, substeps=2, progress=False)


@pytest.fixture
def saved(small, tmp_path):
    path = tmp_path / "small.npz"
    save_dataset(small, path)
    return path


def rewrite(path, out, **changes):
    """Copy the dataset file at ``path`` to ``out`` with metadata keys changed."""
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(str(arrays.pop("metadata")))
    meta.update(changes)
    np.savez(out, metadata=np.array(json.dumps(meta)), **arrays)
    return out


def test_generate_shapes_and_initial_conditions(small):
    assert small.states.shape == (30, 61, 4)
    assert small.n_trajectories == 30
    assert small.t[-1] == pytest.approx(2.0)
    assert small.dt == pytest.approx(1 / 30)
    start = small.states[:, 0]
    np.testing.assert_array_equal(start[:, [1, 3]], 0.0)
    assert np.all(np.abs(start[:, [0, 2]]) <= np.pi)
    assert (small.integrator, small.substeps, small.seed) == ("rk4", 8, 1)
    expected_norm = (energy(start) - small.params.e_min) / (small.params.e_top - small.params.e_min)
    np.testing.assert_allclose(small.energy_norm, expected_norm)


def test_energy_error_is_the_max_drift(small):
    e = energy(small.states)
    expected = np.abs(e - e[:, :1]).max(axis=1) / (small.params.e_top - small.params.e_min)
    np.testing.assert_allclose(small.energy_error, expected)
    assert small.valid.all()


def test_same_seed_same_data_other_seed_other_data(small):
    again = generate_dataset(30, seed=1, duration_s=2.0, progress=False)
    other = generate_dataset(30, seed=2, duration_s=2.0, progress=False)
    np.testing.assert_array_equal(again.states, small.states)
    np.testing.assert_array_equal(again.split, small.split)
    assert not np.allclose(other.states[:, 0], small.states[:, 0])


def test_flagged_trajectories_are_excluded_from_every_split(coarse):
    flagged = coarse.energy_error > ENERGY_TOLERANCE
    assert 0 < flagged.sum() < coarse.n_trajectories  # the check sees both kinds
    np.testing.assert_array_equal(coarse.valid, ~flagged)
    parts = [set(coarse.indices(name)) for name in ("train", "val", "test")]
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert set().union(*parts) == set(np.flatnonzero(~flagged))
    np.testing.assert_array_equal(coarse.split == -1, flagged)


def test_plan_split_sizes_and_disjoint():
    valid = np.ones(1000, dtype=bool)
    valid[::7] = False
    split = plan_split(valid, (0.8, 0.1, 0.1), np.random.default_rng(0))
    n_valid = int(valid.sum())
    counts = [int((split == code).sum()) for code in (0, 1, 2)]
    assert counts[0] == round(0.8 * n_valid) and counts[1] == round(0.1 * n_valid)
    assert sum(counts) == n_valid
    assert np.all(split[~valid] == -1)
    full = plan_split(np.ones(1000, dtype=bool), (0.8, 0.1, 0.1), np.random.default_rng(0))
    assert [int((full == code).sum()) for code in (0, 1, 2)] == [800, 100, 100]


def test_progress_bar_counts_every_trajectory_sample(capsys):
    generate_dataset(3, duration_s=0.5, progress=True)
    err = capsys.readouterr().err
    assert "simulating" in err and "100%" in err and "45.0/45.0" in err  # 3 x 15 samples


def test_indices_rejects_unknown_split(small):
    with pytest.raises(UsageError, match="unknown split 'validation'"):
        small.indices("validation")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_trajectories": 0},
        {"dt": 0.0},
        {"substeps": 0},
        {"duration_s": 0.0},
        {"split_fractions": (0.5, 0.2, 0.2)},
    ],
)
def test_generate_rejects_bad_settings(kwargs):
    settings = {"n_trajectories": 3, "progress": False, **kwargs}
    with pytest.raises(UsageError, match=r"out of range|fractions"):
        generate_dataset(**settings)


def test_round_trip(small, saved):
    loaded = load_dataset(saved)
    assert isinstance(loaded, PendulumDataset)
    for name in ("states", "energy_error", "energy_norm", "valid", "split"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(small, name))
    assert loaded.params == small.params
    assert (loaded.dt, loaded.seed, loaded.integrator, loaded.substeps) == (
        small.dt,
        small.seed,
        small.integrator,
        small.substeps,
    )
    assert loaded.format_version == FORMAT_VERSION
    assert loaded.split.dtype == np.int8 and loaded.valid.dtype == bool


def test_file_is_self_describing(small, saved):
    with np.load(saved) as npz:
        meta = json.loads(str(npz["metadata"]))
    assert meta["format"] == "coursehub.pendulum.dataset"
    assert meta["params"] == {"m1": 2.0, "m2": 1.0, "l1": 1.4, "l2": 1.0, "g": 9.8}
    assert meta["seed"] == 1 and meta["substeps"] == 8 and meta["integrator"] == "rk4"
    assert meta["split_counts"] == {k: len(small.indices(k)) for k in ("train", "val", "test")}
    assert set(meta["arrays"]) == {"states", "energy_error", "energy_norm", "valid", "split"}


def test_save_refuses_to_overwrite_unless_asked(small, saved, tmp_path):
    before = saved.read_bytes()
    other = generate_dataset(3, seed=5, duration_s=0.5, progress=False)
    with pytest.raises(UsageError, match="already exists; pass --force"):
        save_dataset(other, saved)
    assert saved.read_bytes() == before
    save_dataset(other, saved, overwrite=True)
    assert load_dataset(saved).n_trajectories == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.npz"]  # no temp files left


def test_failed_save_leaves_nothing(small, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(UsageError, match="No space left"):
        save_dataset(small, tmp_path / "out.npz")
    assert list(tmp_path.iterdir()) == []


def test_load_missing_file(tmp_path):
    with pytest.raises(UsageError, match="not found; create it with `coursehub pendulum generate"):
        load_dataset(tmp_path / "absent.npz")


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda f: f.write(b"theta1,theta2\n0.1,0.2\n"), "not an npz archive"),
        (lambda f: np.save(f, np.zeros(3)), "not an npz archive"),
        (lambda f: np.savez(f, states=np.zeros((2, 3, 4))), "not a coursehub pendulum dataset"),
        (lambda f: np.savez(f, metadata=np.array('{"format": "other"}')), "format is not"),
    ],
    ids=["text", "npy", "npz-without-metadata", "other-format"],
)
def test_load_wrong_file(tmp_path, write, message):
    path = tmp_path / "wrong.npz"
    with path.open("wb") as f:
        write(f)
    with pytest.raises(UsageError, match=message):
        load_dataset(path)


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_load_truncated_file(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(UsageError, match="truncated or corrupt"):
        load_dataset(saved)


def test_load_newer_format_version(saved, tmp_path):
    newer = rewrite(saved, tmp_path / "newer.npz", format_version=FORMAT_VERSION + 1)
    with pytest.raises(UsageError, match=f"format version {FORMAT_VERSION + 1}, newer"):
        load_dataset(newer)


def test_load_inconsistent_file(saved, tmp_path):
    wrong = rewrite(saved, tmp_path / "wrong.npz", n_samples=7)
    with pytest.raises(UsageError, match="inconsistent: states"):
        load_dataset(wrong)
    bad_params = rewrite(saved, tmp_path / "params.npz", params={"m1": -1})
    with pytest.raises(UsageError, match="inconsistent: bad metadata"):
        load_dataset(bad_params)


def test_make_windows_matches_a_plain_loop():
    states = np.random.default_rng(0).normal(size=(3, 9, 4))
    inputs, targets = make_windows(states, window=4, horizon=2)
    n_per = 9 - 4 - 2 + 1
    assert inputs.shape == (3 * n_per, 4, 4) and targets.shape == (3 * n_per, 2, 4)
    for j in range(3):
        for i in range(n_per):
            np.testing.assert_array_equal(inputs[j * n_per + i], states[j, i : i + 4])
            np.testing.assert_array_equal(targets[j * n_per + i], states[j, i + 4 : i + 6])
    assert make_windows(states.astype(np.float32), 4)[0].dtype == np.float32


@pytest.mark.parametrize(
    ("shape", "window", "horizon"),
    [((3, 9, 4), 9, 1), ((3, 9, 4), 0, 1), ((3, 9, 4), 3, 0), ((9, 4), 3, 1)],
)
def test_make_windows_rejects_bad_sizes(shape, window, horizon):
    with pytest.raises(UsageError, match="cannot cut windows"):
        make_windows(np.zeros(shape), window, horizon)


@pytest.fixture
def generate(monkeypatch, capsys):
    """Run ``coursehub pendulum generate ARGS`` through the real entry point."""

    def run(*args):
        status = main(["pendulum", "generate", "--no-progress", *args])
        return status, capsys.readouterr()

    return run


def test_cli_writes_a_loadable_dataset(generate, tmp_path):
    out = tmp_path / "sub" / "d.npz"
    status, captured = generate(
        "--n-trajectories", "4", "--duration", "1", "--seed", "3", "--out", str(out)
    )
    assert status == 0, captured.err
    assert f"wrote {out}" in captured.out
    ds = load_dataset(out)
    assert ds.states.shape == (4, 31, 4) and ds.seed == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-trajectories", "0"], "n_trajectories=0 is out of range"),
        (["--n-trajectories", "-5"], "n_trajectories=-5 is out of range"),
        (["--dt", "0"], "dt=0.0 is out of range"),
        (["--dt", "-0.1"], "dt=-0.1 is out of range"),
        (["--substeps", "0"], "substeps=0 is out of range"),
        (["--m1", "0"], "m1=0.0 is out of range"),
        (["--l2", "-1"], "l2=-1.0 is out of range"),
        (["--g", "inf"], "g=inf is out of range"),
        (["--duration", "0"], "duration=0.0 s is out of range"),
        (["--seed", "-1"], "seed=-1 is out of range"),
        (["--n-trajectories", "100000000"], "GiB of memory but"),
    ],
)
def test_cli_bad_input_one_line_exit_2_nothing_written(generate, tmp_path, args, message):
    status, captured = generate("--out", str(tmp_path / "d.npz"), *args)
    assert status == 2
    assert captured.err.count("\n") == 1 and message in captured.err
    assert captured.err.startswith("coursehub: error: ")
    assert list(tmp_path.iterdir()) == []


def test_cli_refuses_a_folder_as_output(generate, tmp_path):
    status, captured = generate("--n-trajectories", "2", "--out", str(tmp_path))
    assert status == 2 and "is a folder" in captured.err
    assert list(tmp_path.iterdir()) == []


def test_cli_existing_file_needs_force(generate, saved):
    before = saved.read_bytes()
    status, captured = generate("--n-trajectories", "2", "--duration", "1", "--out", str(saved))
    assert status == 2 and "already exists; pass --force" in captured.err
    assert saved.read_bytes() == before
    status, _ = generate("--n-trajectories", "2", "--duration", "1", "--out", str(saved), "--force")
    assert status == 0 and load_dataset(saved).n_trajectories == 2


def test_importing_the_module_loads_no_heavy_library():
    code = (
        "import sys, coursehub.pendulum.dataset\n"
        "print(','.join(m for m in ('scipy', 'tqdm', 'torch', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
