"""``coursehub hub config``: every spawner kind it renders meters the runner jobs of its servers.

Before, the systemd and Slurm servers got no ``COURSEHUB_USAGE_DIR`` and their
``coursehub run`` jobs wrote no usage. The systemd units now get the jobs'
folder (tests/test_usage_systemd.py). A Slurm job writes from its compute
node: the rendered hub's usage folder must be one the nodes mount
(``--usage-dir``), or the hub's host must be the node (a loopback
``--hub-connect-url``); any other Slurm hub is refused at render, with the
reason, instead of losing each job's usage.
"""

from __future__ import annotations

import pytest
from traitlets.config.loader import PyFileConfigLoader

from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.hub.config import plan_slurm_usage_dir


@pytest.mark.parametrize("kind", ["systemd", "local"])
def test_the_host_spawners_render_with_no_warning_on_metering(kind, capsys):
    assert main(["hub", "config", "--spawner", kind]) == 0
    captured = capsys.readouterr()
    assert "c.JupyterHub.spawner_class" in captured.out
    assert "metered" not in captured.err


def test_a_slurm_hub_whose_nodes_would_not_reach_the_usage_folder_is_refused(capsys):
    assert main(["hub", "config", "--spawner", "slurm"]) == 2
    error = capsys.readouterr().err
    assert "--spawner slurm needs --usage-dir DIR" in error
    assert "does not reach the hub's /run/coursehub" in error


@pytest.mark.parametrize(
    ("connect_url", "usage_dir", "planned"),
    [
        ("http://hub.example.org:8081", "/shared/coursehub/usage/", "/shared/coursehub/usage"),
        ("http://127.0.0.1:8081", "", ""),  # the node is the hub's host: its own folder
        ("http://localhost:8081", "/srv/usage", "/srv/usage"),
    ],
)
def test_the_slurm_usage_folder_is_shared_or_the_hubs_own_on_one_host(
    connect_url, usage_dir, planned
):
    assert plan_slurm_usage_dir(connect_url, usage_dir) == planned


def test_a_relative_usage_folder_is_refused():
    with pytest.raises(UsageError, match="--usage-dir must be an absolute path"):
        plan_slurm_usage_dir("http://hub.example.org:8081", "usage")


def test_the_slurm_config_gives_the_spawner_the_usage_folder_and_runs_the_ingester(
    tmp_path, capsys
):
    pytest.importorskip("batchspawner", reason="the slurm config imports batchspawner")
    target = tmp_path / "jupyterhub_config.py"
    command = ["hub", "config", "--spawner", "slurm", "--usage-dir", "/shared/usage"]
    assert main([*command, "-o", str(target)]) == 0
    config = PyFileConfigLoader(target.name, path=str(tmp_path)).load_config()
    assert config.CoursehubSlurmSpawner.usage_dir == "/shared/usage"
    [ingest] = [s for s in config.JupyterHub.services if s["name"] == "usage-ingest"]
    assert ingest["environment"]["COURSEHUB_USAGE_DIR"] == "/shared/usage"
    assert "ingest" in ingest["command"]
