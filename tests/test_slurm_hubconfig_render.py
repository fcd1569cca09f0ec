"""Slurm hub configurations (`hub config --spawner slurm`, the demo's) as JupyterHub loads them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from traitlets.config.loader import PyFileConfigLoader

from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.hub.render import HubSettings, plan_hub_bind_url, render_hub_config


def load(text: str, tmp_path: Path):
    pytest.importorskip("batchspawner", reason="the slurm config imports batchspawner")
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(text)
    return PyFileConfigLoader(path.name, path=str(tmp_path)).load_config()


def test_the_slurm_config_keeps_servers_and_runs_the_hubs_python_with_slurm_conf(tmp_path):
    config = load(render_hub_config(replace(HubSettings(), kind="slurm")), tmp_path)
    assert config.JupyterHub.cleanup_servers is False  # job ids kept across a restart
    # batchspawner's SlurmSpawner with the stop notice (coursehub.spawn.serverexit)
    assert config.JupyterHub.spawner_class == "coursehub.spawn.slurmspawner.CoursehubSlurmSpawner"
    assert "exec_prefix" not in config.SlurmSpawner  # batchspawner's sudo -E -u {username}
    assert Path(config.SlurmSpawner.batchspawner_singleuser_cmd).is_absolute()
    assert Path(config.Spawner.cmd[0]).name == "jupyterhub-singleuser"
    assert "SLURM_CONF" in config.Spawner.env_keep.get_value(["JUPYTERHUB_SINGLEUSER_APP"])


def test_the_slurm_demo_config_runs_jobs_as_the_hubs_user_and_cancels_them_on_stop(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("COURSEHUB_DEMO_PASSWORD", "demo-password")
    monkeypatch.setenv("COURSEHUB_DEMO_SERVICE_TOKEN", "t" * 32)
    settings = replace(HubSettings(), kind="slurm", demo=True, data_dir=str(tmp_path))
    config = load(render_hub_config(settings), tmp_path)
    assert config.JupyterHub.spawner_class == "coursehub.spawn.slurmspawner.DemoSlurmSpawner"
    assert config.DemoSlurmSpawner.home_dir_template == f"{tmp_path}/homes/{{username}}"
    assert config.JupyterHub.cleanup_servers is True  # Ctrl-C cancels every job


def test_the_demo_takes_local_or_slurm_only():
    with pytest.raises(UsageError, match="local spawner only, or slurm"):
        render_hub_config(replace(HubSettings(), kind="systemd", demo=True))


@pytest.mark.parametrize(
    ("connect_url", "bind_url"),
    [
        ("http://hub.example.org:8081", "http://:8081"),
        ("https://10.0.0.5:9000", "https://:9000"),
    ],
)
def test_the_hub_listens_on_every_interface_at_the_port_the_nodes_use(connect_url, bind_url):
    assert plan_hub_bind_url(connect_url) == bind_url


@pytest.mark.parametrize("bad", ["hub.example.org:8081", "http://hub.example.org", "ftp://h:1"])
def test_a_hub_connect_url_without_scheme_or_port_is_refused(bad):
    with pytest.raises(UsageError, match="--hub-connect-url must look like"):
        plan_hub_bind_url(bad)


def test_cli_renders_the_hub_connect_url_for_slurm(capsys):
    url = "http://hub.example.org:8081"
    command = ["hub", "config", "--spawner", "slurm", "--usage-dir", "/srv/usage"]
    assert main([*command, "--hub-connect-url", url]) == 0
    out = capsys.readouterr().out
    assert f"c.JupyterHub.hub_connect_url = {url!r}" in out
    assert "c.JupyterHub.hub_bind_url = 'http://:8081'" in out
    assert main(["hub", "config", "--spawner", "slurm", "--hub-connect-url", "nope"]) == 2
