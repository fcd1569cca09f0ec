"""``coursehub hub config``: rendered text against golden files, loaded by JupyterHub's loader."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from traitlets.config.loader import PyFileConfigLoader

from coursehub.cli import main
from coursehub.contract import SERVER_ARG, hub_id_for_db_url
from coursehub.errors import UsageError
from coursehub.hub.render import HubSettings, render_hub_config, render_idle_notice
from coursehub.spawn.serverexit import server_stop_notices
from helpers import assert_matches_golden

PYTHON_KINDS = ("systemd", "local", "slurm")


@pytest.mark.parametrize("kind", [*PYTHON_KINDS, "kubernetes"])
def test_rendered_config_matches_golden_file(kind):
    suffix = "yaml" if kind == "kubernetes" else "py"
    text = render_hub_config(replace(HubSettings(), kind=kind))
    assert_matches_golden(text, f"hub_config_{kind}.{suffix}.golden")


def load_python_config(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if "import batchspawner" in text:
        pytest.importorskip("batchspawner", reason="the slurm config imports batchspawner")
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(text)
    return PyFileConfigLoader(path.name, path=str(tmp_path)).load_config()


@pytest.mark.parametrize("kind", PYTHON_KINDS)
def test_python_config_loads_with_jupyterhubs_loader(kind, tmp_path, monkeypatch):
    config = load_python_config(
        render_hub_config(replace(HubSettings(), kind=kind)), tmp_path, monkeypatch
    )
    hub = config.JupyterHub
    assert hub.concurrent_spawn_limit == 20
    assert hub.authenticator_class == "pam"
    services = {s["name"]: s for s in hub.services}
    assert services["coursehub"]["oauth_no_confirm"] is True
    assert "jupyterhub_idle_culler" in services["idle-culler"]["command"]
    # both end with the hub that loads this file (coursehub.spawn.hubservice)
    bound = [sys.executable, "-m", "coursehub.spawn.hubservice", str(os.getpid()), "--"]
    for name in ("coursehub", "idle-culler"):
        assert services[name]["command"][:5] == bound
    assert services["coursehub"]["command"][5:] == ["coursehub", "web", "serve"]
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
    # each says why a server stopped by itself (coursehub.spawn.serverexit)
    assert classes == {
        "systemd": "coursehub.spawn.systemdserver.CoursehubSystemdSpawner",
        "local": "coursehub.spawn.cgroupspawner.CgroupLocalProcessSpawner",
        "slurm": "coursehub.spawn.slurmspawner.CoursehubSlurmSpawner",
    }


@pytest.mark.parametrize("kind", PYTHON_KINDS)
def test_each_rendered_spawner_class_keeps_a_stop_notice(kind, tmp_path, monkeypatch):
    from importlib import import_module

    from coursehub.spawn.serverexit import StopNoticeMixin

    name = load_python_config(
        render_hub_config(replace(HubSettings(), kind=kind)), tmp_path, monkeypatch
    ).JupyterHub.spawner_class
    module, _, cls = name.rpartition(".")
    assert issubclass(getattr(import_module(module), cls), StopNoticeMixin)


def test_demo_config_is_marked_demo_only_and_loads(tmp_path, monkeypatch):
    settings = replace(HubSettings(), kind="local", demo=True, data_dir=str(tmp_path))
    text = render_hub_config(settings)
    assert "DEMO ONLY" in text
    monkeypatch.setenv("COURSEHUB_DEMO_PASSWORD", "demo-password")
    monkeypatch.setenv("COURSEHUB_DEMO_SERVICE_TOKEN", "t" * 32)
    config = load_python_config(text, tmp_path, monkeypatch)
    assert (
        config.JupyterHub.authenticator_class
        == "coursehub.spawn.demoauth.DemoPasswordAuthenticator"
    )
    assert config.SharedPasswordAuthenticator.user_password == "demo-password"
    assert config.JupyterHub.cleanup_servers is True
    assert callable(config.Spawner.pre_spawn_hook)
    # the course app measures the demo's homes (not Unix accounts' homes)
    service = next(s for s in config.JupyterHub.services if s["name"] == "coursehub")
    homes = config.CgroupSimpleLocalProcessSpawner.home_dir_template.format(username="ann")
    assert service["environment"]["COURSEHUB_HOMES_DIR"] == os.path.dirname(homes)


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
    slurm = ["hub", "config", "--spawner", "slurm", "--usage-dir", "/srv/usage"]
    assert main([*slurm, "--spawn-limit", "7"]) == 0
    assert "c.JupyterHub.concurrent_spawn_limit = 7" in capsys.readouterr().out
    target = tmp_path / "values.yaml"
    assert main(["hub", "config", "--spawner", "kubernetes", "-o", str(target)]) == 0
    assert yaml.safe_load(target.read_text())["cull"]["enabled"] is True
    assert main(["hub", "config", "--cull-idle", "0"]) == 2


@pytest.mark.parametrize(
    ("cull_idle_s", "said"),
    [(3600, "after 1 hour without"), (7200, "after 2 hours without"), (90, "after 2 minutes")],
)
def test_students_are_told_when_idle_servers_are_stopped(cull_idle_s, said):
    notice = render_idle_notice(cull_idle_s)
    assert said in notice
    assert "computation still running counts as activity (up to 24 hours)" in notice


@pytest.mark.parametrize(
    ("kind", "section"), [("systemd", "SystemdSpawner"), ("slurm", "SlurmSpawner")]
)
def test_dead_servers_are_polled_within_ten_seconds(kind, section, tmp_path, monkeypatch):
    config = load_python_config(
        render_hub_config(replace(HubSettings(), kind=kind)), tmp_path, monkeypatch
    )
    # JupyterHub's 10 % poll jitter included
    assert 0 < config[section].poll_interval * 1.1 <= 10


@pytest.mark.parametrize("kind", PYTHON_KINDS)
def test_servers_count_busy_kernels_and_students_see_the_idle_rule(kind, tmp_path, monkeypatch):
    settings = replace(HubSettings(), kind=kind, cull_idle_s=1800)
    config = load_python_config(render_hub_config(settings), tmp_path, monkeypatch)
    assert config.Spawner.args[0] == SERVER_ARG
    assert "--MappingKernelManager.cull_busy=False" in config.Spawner.args
    notice = render_idle_notice(1800)
    assert config.JupyterHub.template_vars == {
        "announcement_home": notice,
        "announcement_spawn": notice,
        "server_stop_notices": server_stop_notices,
    }
    culler = {s["name"]: s for s in config.JupyterHub.services}["idle-culler"]
    assert "--timeout=1800" in culler["command"]


def test_kubernetes_pods_count_busy_kernels_and_students_see_the_idle_rule():
    values = yaml.safe_load(render_hub_config(replace(HubSettings(), kind="kubernetes")))
    assert values["hub"]["config"]["KubeSpawner"]["args"][0] == SERVER_ARG
    assert values["hub"]["config"]["JupyterHub"]["template_vars"]["announcement_spawn"] == (
        render_idle_notice(3600)
    )
    assert "no_course='default'" in values["hub"]["extraConfig"]["coursehub-profiles"]


def test_host_wide_names_carry_the_hub_id_of_the_data_dir(tmp_path, monkeypatch):
    ids = {}
    for data_dir in ("/srv/jupyterhub", "/srv/demo"):
        settings = replace(HubSettings(), kind="local", data_dir=data_dir)
        config = load_python_config(render_hub_config(settings), tmp_path, monkeypatch)
        ids[data_dir] = config.CgroupLocalProcessSpawner.hub_id
        assert ids[data_dir] == hub_id_for_db_url(f"sqlite:///{data_dir}/jupyterhub.sqlite")
        assert config.Spawner.apply_user_options.__self__.hub_id == ids[data_dir]
        assert config.CgroupLocalProcessSpawner.device_isolation == "required"
    assert ids["/srv/jupyterhub"] != ids["/srv/demo"]
    systemd = load_python_config(render_hub_config(HubSettings()), tmp_path, monkeypatch)
    assert systemd.SystemdSpawner.unit_name_template == (
        f"jupyter-{ids['/srv/jupyterhub']}-{{USERNAME}}-singleuser"
    )


def test_the_demo_spawner_gets_its_data_dirs_hub_id(tmp_path, monkeypatch):
    settings = replace(HubSettings(), kind="local", demo=True, data_dir=str(tmp_path))
    monkeypatch.setenv("COURSEHUB_DEMO_PASSWORD", "demo-password")
    monkeypatch.setenv("COURSEHUB_DEMO_SERVICE_TOKEN", "t" * 32)
    config = load_python_config(render_hub_config(settings), tmp_path, monkeypatch)
    expected = hub_id_for_db_url(f"sqlite:///{tmp_path}/jupyterhub.sqlite")
    assert config.CgroupSimpleLocalProcessSpawner.hub_id == expected


@pytest.mark.parametrize("choice", ["default", "refuse"])
def test_the_no_course_choice_reaches_the_spawner_hooks(choice, tmp_path, monkeypatch, capsys):
    assert main(["hub", "config", "--spawner", "local", "--no-course", choice]) == 0
    config = load_python_config(capsys.readouterr().out, tmp_path, monkeypatch)
    assert config.Spawner.apply_user_options.__self__.no_course == choice
    with pytest.raises(UsageError, match="no_course"):
        render_hub_config(replace(HubSettings(), no_course="maybe"))
