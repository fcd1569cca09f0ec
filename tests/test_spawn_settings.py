"""Spawn-storm settings: the concurrent_spawn_limit rule and the spawner timeouts."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from coursehub.demo.setup import demo_spawn_limit
from coursehub.errors import UsageError
from coursehub.hub.render import HubSettings, plan_spawn_limit, render_hub_config


@pytest.mark.parametrize(
    ("n_cpus", "per_cpu", "expected"),
    [(2, 2, 4), (16, 2, 32), (2, 3, 6), (1.5, 2, 3), (0.5, 2, 2), (0.1, 4, 2)],
)
def test_spawn_limit_is_per_cpu_with_a_floor_of_two(n_cpus, per_cpu, expected):
    assert plan_spawn_limit(n_cpus, per_cpu) == expected


def test_demo_spawn_limit_follows_the_machine_unless_overridden(monkeypatch):
    monkeypatch.setattr("coursehub.resources.cpus.effective_cpus", lambda: 3.0)
    assert demo_spawn_limit(None) == 6
    assert demo_spawn_limit("") == 6
    assert demo_spawn_limit("30") == 30


@pytest.mark.parametrize("text", ["0", "-3", "four", "2.5"])
def test_bad_spawn_limit_override_is_a_usage_error(text):
    with pytest.raises(UsageError, match=f"COURSEHUB_SPAWN_LIMIT .* got '{text}'"):
        demo_spawn_limit(text)


@pytest.mark.parametrize(
    ("kind", "start_timeout_s"), [("local", 120), ("systemd", 120), ("slurm", 300)]
)
def test_python_configs_set_both_spawner_timeouts_once(kind, start_timeout_s):
    text = render_hub_config(replace(HubSettings(), kind=kind))
    assert text.count("c.Spawner.start_timeout =") == 1
    assert f"c.Spawner.start_timeout = {start_timeout_s}\n" in text
    assert "c.Spawner.http_timeout = 180\n" in text


def test_explicit_timeouts_win_in_python_and_kubernetes_configs():
    settings = replace(HubSettings(), start_timeout_s=45, http_timeout_s=90)
    text = render_hub_config(replace(settings, kind="slurm"))
    assert "c.Spawner.start_timeout = 45\n" in text
    assert "c.Spawner.http_timeout = 90\n" in text
    values = yaml.safe_load(render_hub_config(replace(settings, kind="kubernetes")))
    assert values["singleuser"]["startTimeout"] == 45
    assert values["hub"]["config"]["KubeSpawner"]["http_timeout"] == 90


def test_kubernetes_default_start_timeout_allows_an_image_pull():
    values = yaml.safe_load(render_hub_config(replace(HubSettings(), kind="kubernetes")))
    assert values["singleuser"]["startTimeout"] == 300


def test_retry_after_range_reaches_the_hub_through_tornado_settings(tmp_path):
    from jupyterhub.app import JupyterHub
    from traitlets.config.loader import PyFileConfigLoader

    settings = replace(HubSettings(), kind="local", spawn_retry_range_s=(7, 21))
    (tmp_path / "jupyterhub_config.py").write_text(render_hub_config(settings))
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(tmp_path)).load_config()
    assert JupyterHub(config=config).tornado_settings["spawn_throttle_retry_range"] == (7, 21)
    values = yaml.safe_load(render_hub_config(replace(settings, kind="kubernetes")))
    assert values["hub"]["config"]["JupyterHub"]["tornado_settings"] == {
        "spawn_throttle_retry_range": [7, 21]
    }
