import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from coursehub.errors import UsageError
from coursehub.pendulum import resume, train, trainsettings
from coursehub.pendulum.checkpoint import load_checkpoint
from coursehub.pendulum.config import ModelConfig, TrainConfig
from coursehub.pendulum.datafile import load_dataset, save_dataset
from coursehub.pendulum.dataset import generate_dataset
from coursehub.pendulum.fitting import WARMUP_STEPS, TrainData, fit, plan_epoch, plan_lr
from coursehub.resources.cpus import effective_cpus
from coursehub.usecases.pendulum_pipeline import plan_train_args
from helpers import wait_until

SMALL = ["--max-windows", "512", "--batch-size", "64", "--hidden-size", "16", "--no-progress"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "pendulum.npz"
    save_dataset(generate_dataset(20, seed=3, duration_s=4.0, progress=False), path)
    return path


def run_train(capsys, *argv):
    status = train.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_smoke_run_writes_a_weights_only_checkpoint(tmp_path, data, capsys):
    model_file = tmp_path / "model.pt"
    status, out, _ = run_train(capsys, model_file, 2, 1, "--data", data, *SMALL)
    assert status == 0
    ckpt = torch.load(model_file, weights_only=True)
    assert ckpt["epoch"] == 2 and len(ckpt["history"]["val_loss"]) == 2
    assert ckpt["model_config"]["arch"] == "lstm"
    assert set(ckpt["scaler"]) == {"state_offset", "state_scale", "step_scale"}
    assert "samples/s" in out and "threads 1" in out and "cpu" in out
    assert not list(tmp_path.glob(".*tmp"))


def test_resume_equals_uninterrupted_run(tmp_path, data, capsys):
    straight, split = tmp_path / "straight.pt", tmp_path / "split.pt"
    common = ["--data", data, "--noise", "0.2", *SMALL]
    assert run_train(capsys, straight, 3, 1, *common)[0] == 0
    assert run_train(capsys, split, 1, 1, *common)[0] == 0
    assert run_train(capsys, split, 3, 1, "--resume", *common)[0] == 0
    a, b = torch.load(straight, weights_only=True), torch.load(split, weights_only=True)
    assert b["epoch"] == 3
    for name, tensor in a["model_state"].items():
        torch.testing.assert_close(b["model_state"][name], tensor, rtol=0, atol=1e-6)
    assert a["history"]["train_loss"] == pytest.approx(b["history"]["train_loss"], abs=1e-6)


def test_course_architecture_trains_with_batch_one(tmp_path, data, capsys):
    model_file = tmp_path / "course.pt"
    argv = [model_file, 1, 1, "--data", data, "--arch", "course", "--max-windows", "50"]
    assert run_train(capsys, *argv, "--no-progress")[0] == 0
    ckpt = load_checkpoint(model_file, expect_arch="course")
    assert ckpt["train_config"]["batch_size"] == 1
    assert ckpt["model_config"]["hidden_size"] == 100


def test_too_many_threads_is_only_a_warning(tmp_path, data, capsys):
    n = int(effective_cpus()) + 1
    status, _, err = run_train(capsys, tmp_path / "m.pt", 1, n, "--data", data, *SMALL)
    assert status == 0
    assert f"warning: N_THREADS={n} exceeds" in err


def corrupt(path):
    path.write_bytes(b"PK\x03\x04 not really a zip")
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("epochs", "N_EPOCHS=0"),
        ("threads", "N_THREADS=0"),
        ("missing-data", "not found"),
        ("corrupt-data", "truncated or corrupt"),
        ("exists", "already exists"),
        ("corrupt-checkpoint", "corrupt"),
        ("other-arch", "holds a 'lstm' model"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_keeps_files(tmp_path, data, capsys, case, message):
    model_file = tmp_path / "model.pt"
    argv = [model_file, 1, 1, "--data", data, *SMALL]
    if case in ("exists", "corrupt-checkpoint"):
        model_file.write_bytes(b"precious bytes")
        argv += ["--resume"] if case == "corrupt-checkpoint" else []
    elif case == "other-arch":
        assert run_train(capsys, *argv)[0] == 0
        argv = [model_file, 2, 1, "--data", data, "--arch", "course", "--resume"]
    else:
        model_file.write_bytes(b"precious bytes")
        argv[1:5] = {
            "epochs": [0, 1, "--data", data],
            "threads": [1, 0, "--data", data],
            "missing-data": [1, 1, "--data", tmp_path / "nope.npz"],
            "corrupt-data": [1, 1, "--data", corrupt(tmp_path / "bad.npz")],
        }[case]
        argv += ["--force"]
    before = model_file.read_bytes()
    status, _, err = run_train(capsys, *argv)
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    assert model_file.read_bytes() == before


def test_coursehub_command_reports_one_line(tmp_path, data):
    cmd = [
        sys.executable,
        "-m",
        "coursehub",
        "pendulum",
        "train",
        str(tmp_path / "m.pt"),
        "0",
        "1",
        "--data",
        str(data),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "coursehub: error: N_EPOCHS=0 is out of range: it must be >= 1"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_leaves_a_valid_checkpoint(tmp_path, data, signum, status):
    model_file = tmp_path / "model.pt"
    cmd = [
        sys.executable,
        "-m",
        "coursehub.pendulum.train",
        str(model_file),
        "1000",
        "1",
        "--data",
        str(data),
        *SMALL,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: model_file.exists() or proc.poll() is not None, 60, what="a checkpoint")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert f"stopped by {signal.Signals(signum).name}" in err and "--resume" in err
    ckpt = load_checkpoint(model_file)
    assert 1 <= ckpt["epoch"] < 1000
    assert len(ckpt["history"]["train_loss"]) == ckpt["epoch"]


def test_plan_epoch_is_a_function_of_seed_and_epoch():
    a = plan_epoch(1000, 300, 64, seed=5, epoch=2)
    b = plan_epoch(1000, 300, 64, seed=5, epoch=2)
    c = plan_epoch(1000, 300, 64, seed=5, epoch=3)
    assert all((x == y).all() for x, y in zip(a, b, strict=True))
    assert sum(len(x) for x in a) == 300 and len({int(i) for x in a for i in x}) == 300
    assert not all((x == y).all() for x, y in zip(a, c, strict=True))


def test_plan_lr_warms_up_then_decays_per_epoch():
    cfg = TrainConfig(lr=1e-3, lr_decay=0.5)
    lrs = [plan_lr(step, 1000, cfg) for step in range(3000)]
    assert lrs[0] < lrs[WARMUP_STEPS - 1] <= 1e-3
    assert all(b < a for a, b in zip(lrs[WARMUP_STEPS:], lrs[WARMUP_STEPS + 1 :], strict=False))
    assert lrs[2000] == pytest.approx(1e-3 / 4)


def test_torch_loads_only_after_the_thread_count_is_set(tmp_path, data):
    code = (
        "import os, sys\n"
        "import coursehub.pendulum.train as t\n"
        "apply = t.apply_threads\n"
        "def spy(n):\n"
        "    print('torch loaded before threads:', 'torch' in sys.modules)\n"
        "    apply(n)\n"
        "    import torch\n"
        "    print('threads', torch.get_num_threads(), os.environ['OMP_NUM_THREADS'])\n"
        "t.apply_threads = spy\n"
        "sys.exit(t.main(sys.argv[1:]))\n"
    )
    argv = [str(tmp_path / "m.pt"), "1", "1", "--data", str(data), *SMALL]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    assert "torch loaded before threads: False" in out.stdout
    assert "threads 1 1" in out.stdout


def test_pipeline_trains_through_the_course_interface(tmp_path):
    args = argparse.Namespace(epochs=2, seed=0, max_windows=None)
    argv = plan_train_args(tmp_path, args, 3)
    assert argv[:4] == [str(tmp_path / "model.pt"), "2", "3", "--data"]


def parse_train(*argv):
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    return parser.parse_args([str(a) for a in argv])


CHECKPOINT_SETTINGS = {
    "model_config": {
        "arch": "lstm",
        "hidden_size": 128,
        "n_layers": 2,
        "window": 10,
        "dropout": 0.0,
    },
    "train_config": {
        "n_epochs": 1,
        "batch_size": 256,
        "lr": 0.002,
        "seed": 0,
        "max_windows": 512,
        "rollout_steps": 1,
        "noise": 0.1,
        "lr_decay": 0.7,
    },
    "data": {"file": "data.npz", "seed": 3, "trajectories": None},
}


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ([], []),
        (["--lr", "2e-3", "--hidden-size", "128", "--seed", "0"], []),  # same values
        (["--lr", "0.01"], ["checkpoint has lr=0.002, --lr 0.01 given"]),
        (["--hidden-size", "64"], ["checkpoint has hidden_size=128, --hidden-size 64 given"]),
        (["--layers", "3"], ["checkpoint has n_layers=2, --layers 3 given"]),
        (["--batch-size", "7"], ["checkpoint has batch_size=256, --batch-size 7 given"]),
        (["--rollout-steps", "4"], ["checkpoint has rollout_steps=1, --rollout-steps 4 given"]),
        (["--noise", "0"], ["checkpoint has noise=0.1, --noise 0.0 given"]),
        (["--lr-decay", "1"], ["checkpoint has lr_decay=0.7, --lr-decay 1.0 given"]),
        (["--seed", "5"], ["checkpoint has seed=0, --seed 5 given"]),
        (["--max-windows", "64"], ["checkpoint has max_windows=512, --max-windows 64 given"]),
        (["--trajectories", "5"], ["checkpoint has trajectories=all, --trajectories 5 given"]),
        (["--arch", "course"], ["checkpoint has arch=lstm, --arch course given"]),
        (
            ["--hidden-size", "64", "--lr", "0.5", "--batch-size", "7"],
            [
                "checkpoint has hidden_size=128, --hidden-size 64 given",
                "checkpoint has batch_size=256, --batch-size 7 given",
                "checkpoint has lr=0.002, --lr 0.5 given",
            ],
        ),
        # changeable on resume: the epochs, threads, data file, device, progress bar
        (["--data", "elsewhere.npz", "--device", "cpu", "--no-progress"], []),
    ],
)
def test_a_resume_refuses_each_option_given_with_another_value(options, refused):
    request = train.plan_request(parse_train("m.pt", 9, 4, "--resume", *options))
    assert resume.plan_resume_conflicts(request.given, CHECKPOINT_SETTINGS) == refused


def test_the_resume_help_names_what_may_change():
    text = " ".join(trainsettings.RESUME_HELP.split())
    for name in trainsettings.RESUME_CHANGEABLE:
        assert name in text


@pytest.mark.parametrize("command", ["module", "coursehub"])
def test_resuming_with_other_hyperparameters_exits_2_and_keeps_the_checkpoint(
    tmp_path, data, capsys, command
):
    model_file = tmp_path / "model.pt"
    assert run_train(capsys, model_file, 1, 1, "--data", data, *SMALL)[0] == 0
    before = model_file.read_bytes()
    argv = [
        str(model_file),
        "2",
        "1",
        "--data",
        str(data),
        "--no-progress",
        "--resume",
        "--hidden-size",
        "64",
        "--lr",
        "0.5",
        "--batch-size",
        "7",
    ]
    module = ["coursehub.pendulum.train"] if command == "module" else ["coursehub", "pendulum"]
    prefix = module + ([] if command == "module" else ["train"])
    proc = subprocess.run(
        [sys.executable, "-m", *prefix, *argv], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    for part in (
        "checkpoint has hidden_size=16, --hidden-size 64 given",
        "checkpoint has lr=0.002, --lr 0.5 given",
        "checkpoint has batch_size=64, --batch-size 7 given",
    ):
        assert part in err
    assert model_file.read_bytes() == before


def test_resuming_with_options_left_out_continues_with_the_checkpoints_settings(
    tmp_path, data, capsys
):
    model_file = tmp_path / "model.pt"
    assert run_train(capsys, model_file, 1, 1, "--data", data, *SMALL, "--lr", "0.01")[0] == 0
    status, out, err = run_train(
        capsys, model_file, 2, 2, "--data", data, "--resume", "--no-progress"
    )
    assert status == 0, err
    ckpt = load_checkpoint(model_file)
    assert ckpt["epoch"] == 2 and ckpt["train_config"]["lr"] == 0.01
    assert ckpt["model_config"]["hidden_size"] == 16 and "2 x 16 hidden" in out


@pytest.mark.parametrize("arch", ["lstm", "course"])
def test_every_option_left_out_is_filled_from_the_arch_preset(arch):
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    assert all(parser.get_default(option) is None for option in trainsettings.RESUME_FIXED)
    request = train.plan_request(parse_train("m.pt", 3, 1, "--arch", arch))
    model, cfg, trajectories = trainsettings.plan_configs(request.n_epochs, request.given)
    assert model == ModelConfig.preset(arch)
    assert cfg == replace(TrainConfig.preset(arch), n_epochs=3)
    assert trajectories is None


def test_an_option_given_changes_only_its_own_setting():
    request = train.plan_request(
        parse_train("m.pt", 2, 1, "--arch", "course", "--layers", "3", "--noise", "0.5")
    )
    model, cfg, _ = trainsettings.plan_configs(request.n_epochs, request.given)
    assert model == replace(ModelConfig.preset("course"), n_layers=3)
    assert cfg == replace(TrainConfig.preset("course"), n_epochs=2, noise=0.5)


def test_the_help_shows_each_presets_default():
    assert trainsettings.render_preset_help("hidden_size") == "default: lstm 128, course 100"
    assert trainsettings.render_preset_help("rollout_steps") == "default: 1"


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["--batch-size", "0"], "batch_size=0"),
        (["--rollout-steps", "0"], "rollout_steps=0"),
        (["--lr", "-1"], "lr=-1.0"),
        (["--lr", "nan"], "lr=nan"),
        (["--noise", "-0.5"], "noise=-0.5"),
        (["--lr-decay", "1.5"], "lr_decay=1.5"),
        (["--seed", "-1"], "seed=-1"),
        (["--max-windows", "0"], "max_windows=0"),
        (["--hidden-size", "0"], "hidden_size=0"),
        (["--layers", "0"], "n_layers=0"),
        (["--trajectories", "0"], "--trajectories=0"),
    ],
)
def test_a_setting_out_of_range_is_refused_by_name(option, named):
    request = train.plan_request(parse_train("m.pt", 1, 1, *option))
    with pytest.raises(UsageError, match=re.escape(named)):
        trainsettings.plan_configs(request.n_epochs, request.given)


def test_a_bad_setting_exits_2_before_anything_is_written(tmp_path, data, capsys):
    model_file = tmp_path / "model.pt"
    status, _, err = run_train(capsys, model_file, 1, 1, "--data", data, "--lr-decay", "0")
    assert status == 2 and "lr_decay=0.0 must be in (0, 1]" in err
    assert not model_file.exists()


def test_fit_takes_typed_settings_and_returns_the_state(data):
    model = ModelConfig(hidden_size=8, n_layers=1)
    cfg = TrainConfig(n_epochs=2, batch_size=32, max_windows=64)
    lines = []
    state = fit(model, cfg, TrainData.from_dataset(load_dataset(data), data), log=lines.append)
    assert state.epoch == 2 and state.global_step == 4 and state.n_windows == 128
    assert state.model.config == model and len(state.history["val_loss"]) == 2
    assert state.best_val_loss == min(state.history["val_loss"])
    assert lines[0].startswith("lstm model, 1 x 8 hidden") and lines[-1].startswith("epoch 2/2")


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("arch", ["lstm", "course"])
def test_a_checkpoint_written_before_the_settings_moved_resumes(tmp_path, data, capsys, arch):
    # made by the code of commit 619fc33 (trainer.py, ARCH_DEFAULTS) on the `data` fixture's
    # dataset: MODEL 1 1 --data DATA --hidden-size 8 [--layers 1 --max-windows 128
    # --batch-size 32 | --arch course --max-windows 20] --no-progress
    model_file = tmp_path / "model.pt"
    shutil.copy(FIXTURES / f"pendulum-checkpoint-v1-{arch}.pt", model_file)
    old = load_checkpoint(model_file, expect_arch=arch)
    status, out, err = run_train(
        capsys, model_file, 2, 1, "--data", data, "--resume", "--no-progress"
    )
    assert status == 0, err
    new = load_checkpoint(model_file, expect_arch=arch)
    assert new["epoch"] == 2 and new["model_config"] == old["model_config"]
    assert new["train_config"] == {**old["train_config"], "n_epochs": 2}
    assert new["history"]["train_loss"][0] == old["history"]["train_loss"][0]
    assert f"{arch} model, 1 x 8 hidden" in out


def test_an_old_checkpoint_still_refuses_another_setting(tmp_path, data, capsys):
    model_file = tmp_path / "model.pt"
    shutil.copy(FIXTURES / "pendulum-checkpoint-v1-lstm.pt", model_file)
    status, _, err = run_train(
        capsys, model_file, 2, 1, "--data", data, "--resume", "--noise", "0", "--layers", "2"
    )
    assert status == 2
    assert "checkpoint has n_layers=1, --layers 2 given" in err
    assert "checkpoint has noise=0.1, --noise 0.0 given" in err


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root only: skipped otherwise), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    disk = tmp_path / "small"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write ``disk/filler`` until the file system is full; return it."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    return filler


def resume_refused(model_file: Path, data: Path) -> str:
    """Resume ``model_file`` to epoch 2 in a fresh ``coursehub``; return its one error line.

    Asserts that it exits with status 2, one line and no traceback.
    """
    argv = [str(model_file), "2", "1", "--data", str(data), "--resume", *SMALL]
    cmd = [sys.executable, "-m", "coursehub", "pendulum", "train", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    return proc.stderr.strip()


def test_a_resume_on_a_full_disk_exits_with_one_line_and_keeps_the_previous_checkpoint(
    small_disk, data, capsys
):
    model_file = small_disk / "m.pt"
    assert run_train(capsys, model_file, 1, 1, "--data", data, *SMALL)[0] == 0
    before = model_file.read_bytes()
    filler = fill(small_disk)
    assert resume_refused(model_file, data) == (
        f"coursehub: error: disk full: checkpoint of epoch 2 not written; {model_file} still "
        "holds epoch 1: free some space, then continue with --resume"
    )
    assert model_file.read_bytes() == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "m.pt"]
    filler.unlink()
    assert run_train(capsys, model_file, 2, 1, "--data", data, "--resume", *SMALL)[0] == 0


def test_a_full_disk_on_a_first_checkpoint_says_none_was_written():
    full = OSError(28, "No space left on device", "m.pt")
    assert train.describe_checkpoint_full(Path("m.pt"), 1, 0, full) == (
        "disk full: checkpoint of epoch 1 not written; no checkpoint of this run written, "
        "m.pt unchanged: free some space and start again"
    )


def test_a_resume_onto_a_read_only_file_system_exits_with_one_line_and_keeps_the_checkpoint(
    small_disk, data, capsys
):
    model_file = small_disk / "m.pt"
    assert run_train(capsys, model_file, 1, 1, "--data", data, *SMALL)[0] == 0
    before = model_file.read_bytes()
    remount = ["mount", "-o", "remount,ro", str(small_disk)]
    subprocess.run(remount, check=True, capture_output=True)
    assert resume_refused(model_file, data) == (
        f"coursehub: error: read-only file system: checkpoint of epoch 2 not written; "
        f"{model_file} still holds epoch 1: write to a folder on a writable file system, "
        "then continue with --resume"
    )
    assert model_file.read_bytes() == before
