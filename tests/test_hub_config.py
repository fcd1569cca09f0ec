"""``coursehub hub config``: rendered text against golden files, loaded by JupyterHub's loader."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from traitlets.config.loader import PyFileConfigLoader

from coursehub.cli import main
from coursehub.errors import UsageError
from coursehub.hub.config import HubSettings, render_hub_config

GOLDEN = Path(__file__).parent / "golden"
PYTHON_KINDS = ("systemd", "local", "slurm")


def golden_text(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", [*PYTHON_KINDS, "kubernetes"])
def test_rendered_config_matches_golden_file(kind):
    suffix = "yaml" if kind == "kubernetes" else "py"
    text = render_hub_config(replace(HubSettings(), kind=kind))
    assert text == golden_text(f"hub_config_{kind}.{suffix}.golden")


def load_python_config(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if "import batchspawner" in text:
        pytest.importorskip("batchspawner", reason="the slurm config imports batchspawner")
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(text)
    return PyFileConfigLoader(path.name, path=str(tmp_path)).load_config()


@pytest.mark.parametrize("kind", PYTHON_KINDS)
def test_python_config_loads_with_jupyterhubs_loader(kind, tmp_path, monkeypatch):
    config = load_python_config(render_hub_config(replace(HubSettings(), kind=kind)), tmp_path,
                                monkeypatch)  # fmt: skip
    hub = config.JupyterHub
    assert hub.concurrent_spawn_limit == 20
    assert hub.authenticator_class == "pam"
    services = {s["name"]: s for s in hub.services}
    assert services["coursehub"]["oauth_no_confirm"] is True
    assert "jupyterhub_idle_culler" in services["idle-culler"]["command"]
    roles = {r["name"]: r for r in hub.load_roles}
    assert {"admin:users", "admin:groups"} <= set(roles["coursehub-sync"]["scopes"])
    assert "access:services!service=coursehub" in roles["user"]["scopes"]
    profiles = config.Spawner.apply_user_options.__self__
    assert profiles.kind == kind
    assert config.Spawner.options_form == profiles.options_form


def test_each_kind_names_its_spawner(tmp_path, monkeypatch):
    classes = {
        kind: load_python_config(
            render_hub_config(replace(HubSettings(), kind=kind)), tmp_path, monkeypatch
        ).JupyterHub.spawner_class
        for kind in PYTHON_KINDS
    }
    assert classes == {
        "systemd": "systemdspawner.SystemdSpawner",
        "local": "coursehub.hub.cgroupspawner.CgroupLocalProcessSpawner",
        "slurm": "batchspawner.SlurmSpawner",
    }


def test_demo_config_is_marked_demo_only_and_loads(tmp_path, monkeypatch):
    settings = replace(HubSettings(), kind="local", demo=True, data_dir=str(tmp_path))
    text = render_hub_config(settings)
    assert "DEMO ONLY" in text
    monkeypatch.setenv("COURSEHUB_DEMO_PASSWORD", "demo-password")
    monkeypatch.setenv("COURSEHUB_DEMO_SERVICE_TOKEN", "t" * 32)
    config = load_python_config(text, tmp_path, monkeypatch)
    assert config.JupyterHub.authenticator_class == "shared-password"
    assert config.SharedPasswordAuthenticator.user_password == "demo-password"
    assert config.JupyterHub.cleanup_servers is True
    assert callable(config.Spawner.pre_spawn_hook)


def test_kubernetes_values_have_z2jh_structure():
    values = yaml.safe_load(render_hub_config(replace(HubSettings(), kind="kubernetes")))
    assert set(values) == {"hub", "singleuser", "cull"}
    assert values["hub"]["config"]["JupyterHub"]["concurrent_spawn_limit"] == 20
    assert values["hub"]["services"]["coursehub"]["oauth_no_confirm"] is True
    assert "admin:groups" in values["hub"]["loadRoles"]["coursehub-sync"]["scopes"]
    assert "CourseProfiles(" in values["hub"]["extraConfig"]["coursehub-profiles"]
    assert values["singleuser"]["memory"]["limit"] == "2G"
    assert values["cull"] == {"enabled": True, "timeout": 3600, "every": 300}


def test_unknown_kind_and_demo_with_another_spawner_are_usage_errors():
    with pytest.raises(UsageError, match="unknown spawner 'docker'"):
        render_hub_config(replace(HubSettings(), kind="docker"))
    with pytest.raises(UsageError, match="local spawner only"):
        render_hub_config(replace(HubSettings(), kind="systemd", demo=True))


def test_cli_prints_and_writes_the_config(capsys, tmp_path):
    assert main(["hub", "config", "--spawner", "slurm", "--spawn-limit", "7"]) == 0
    assert "c.JupyterHub.concurrent_spawn_limit = 7" in capsys.readouterr().out
    target = tmp_path / "values.yaml"
    assert main(["hub", "config", "--spawner", "kubernetes", "-o", str(target)]) == 0
    assert yaml.safe_load(target.read_text())["cull"]["enabled"] is True
    assert main(["hub", "config", "--cull-idle", "0"]) == 2
