"""``coursehub deploy`` into a temporary root: files, modes, units, idempotence."""

from __future__ import annotations

import configparser
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from coursehub.cli import main
from coursehub.deploy.files import read_env_file
from coursehub.deploy.units import TIMERS

PROXY = Path(sys.executable).parent.parent / "node/node_modules/.bin/configurable-http-proxy"
ETC = Path("etc/coursehub")
UNITS = Path("etc/systemd/system")

pytestmark = pytest.mark.skipif(
    not os.access(PROXY, os.X_OK), reason=f"configurable-http-proxy missing ({PROXY}; make setup)"
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _deploy(root: Path, *extra: str) -> list[str]:
    argv = ["deploy", "--root", str(root), "--proxy", str(PROXY), "--hostname", "hub.test"]
    return [*argv, *extra]


def _unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(path)
    return parser


def test_a_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    assert main(_deploy(tmp_path, "--dry-run")) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"paths below {tmp_path}, where this run writes;")
    assert f"create {tmp_path}/etc/coursehub/secrets.env (0600)" in out
    assert f"create {tmp_path}/etc/systemd/system/coursehub-hub.service (0644)" in out
    assert f"FOR A TRIAL ONLY (browsers warn): {tmp_path}/etc/coursehub/tls/" in out
    assert "create /etc/coursehub" not in out  # the host's own paths are not written
    assert "migrate the catalog from revision (empty)" in out
    assert list(tmp_path.iterdir()) == []


def test_a_dry_run_finds_the_proxy_in_the_virtual_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")  # no proxy there
    argv = ["deploy", "--root", str(tmp_path), "--dry-run", "--python", sys.executable]
    assert main(argv) == 0, capsys.readouterr().err
    assert "create" in capsys.readouterr().out


def test_without_a_proxy_the_places_looked_at_are_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "no-venv"))
    python = str(tmp_path / "no-venv" / "bin" / "python")
    assert main(["deploy", "--root", str(tmp_path), "--dry-run", "--python", python]) == 2
    err = capsys.readouterr().err
    assert "is not on the PATH nor in the virtual environment" in err and "--proxy" in err


def test_deploy_writes_the_install_once_and_a_second_run_changes_nothing(tmp_path, capsys):
    assert main(_deploy(tmp_path)) == 0
    first = capsys.readouterr().out
    assert "applied" in first and "coursehub doctor:" in first
    assert "catalog:" in first  # doctor ran last, on the migrated catalog
    etc = tmp_path / ETC
    for name in ("secrets.env", "jupyterhub_cookie_secret", "web.env", "jupyterhub_config.py"):
        assert _mode(etc / name) == 0o600, name
    assert _mode(etc / "tls/trial-self-signed-key.pem") == 0o600
    assert _mode(tmp_path / "var/lib/coursehub/hub") == 0o700
    assert (tmp_path / "var/lib/coursehub/catalog.sqlite").is_file()
    secrets = read_env_file(etc / "secrets.env")
    assert len(secrets["COURSEHUB_SERVICE_TOKEN"]) == 64
    cookie = (etc / "jupyterhub_cookie_secret").read_text()
    config = (etc / "jupyterhub_config.py").read_text()
    compile(config, "jupyterhub_config.py", "exec")
    assert "CoursehubSystemdSpawner" in config
    assert "c.JupyterHub.ssl_cert = '/etc/coursehub/tls/trial-self-signed-cert.pem'" in config
    assert str(PROXY) in config  # JupyterHub starts this proxy
    subject = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-in", etc / "tls/trial-self-signed-cert.pem"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "TRIAL" in subject and "hub.test" in subject

    assert main(_deploy(tmp_path)) == 0
    second = capsys.readouterr().out
    assert second.startswith("nothing to change")
    assert (etc / "jupyterhub_cookie_secret").read_text() == cookie
    assert read_env_file(etc / "secrets.env") == secrets


def test_the_units_run_the_hub_the_course_app_and_the_timers(tmp_path, capsys):
    assert main(_deploy(tmp_path)) == 0
    units = tmp_path / UNITS
    hub = _unit(units / "coursehub-hub.service")
    assert hub["Service"]["ExecStart"] == (
        f"{Path(sys.executable).parent}/jupyterhub --config=/etc/coursehub/jupyterhub_config.py"
    )
    assert hub["Service"]["User"] == "root"
    assert hub["Install"]["WantedBy"] == "multi-user.target"
    web = _unit(units / "coursehub-web.service")
    assert "coursehub web serve" in web["Service"]["ExecStart"]
    assert "--workers auto" in web["Service"]["ExecStart"]
    for stem in TIMERS:
        assert _unit(units / f"{stem}.timer")["Timer"]["OnCalendar"]
        assert _unit(units / f"{stem}.service")["Service"]["Type"] == "oneshot"
    backup = _unit(units / "coursehub-backup.service")["Service"]["ExecStart"]
    assert backup.endswith(
        "-m coursehub backup /var/lib/coursehub/backups --hub-dir /var/lib/coursehub/hub"
    )
    conf = tmp_path / "etc/tmpfiles.d/coursehub.conf"
    assert "d /run/coursehub/usage 0700 root root -" in conf.read_text()
    if shutil.which("systemd-tmpfiles"):  # the lines parse, and make the folder below --root
        argv = ["systemd-tmpfiles", f"--root={tmp_path}", "--create", str(conf)]
        assert subprocess.run(argv, capture_output=True).returncode == 0
        assert _mode(tmp_path / "run/coursehub/usage") == 0o700
    if shutil.which("systemd-analyze"):
        files = sorted(str(p) for p in units.iterdir())
        done = subprocess.run(
            ["systemd-analyze", "verify", "--man=no", *files], capture_output=True, text=True
        )
        assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_hub_config_loads_as_jupyterhub_loads_it(tmp_path, capsys, monkeypatch):
    from traitlets.config import Config

    assert main(_deploy(tmp_path)) == 0
    text = (tmp_path / ETC / "jupyterhub_config.py").read_text()
    monkeypatch.setenv("COURSEHUB_SERVICE_TOKEN", "t" * 64)
    config = Config()
    exec(compile(text, "jupyterhub_config.py", "exec"), {"get_config": lambda: config})
    app = {s["name"]: s for s in config.JupyterHub.services}["coursehub"]
    assert "command" not in app and app["api_token"] == "t" * 64  # its own unit
    assert app["url"] == "http://127.0.0.1:10101"
    assert config.JupyterHub.cookie_secret_file == "/etc/coursehub/jupyterhub_cookie_secret"
    assert config.JupyterHub.bind_url == "https://:443"
    assert config.ConfigurableHTTPProxy.command == [str(PROXY)]


def test_given_certificate_files_are_installed_with_a_private_key(tmp_path, capsys):
    pair = tmp_path / "given"
    pair.mkdir()
    key, cert = pair / "k.pem", pair / "c.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subject = ["-subj", "/CN=hub.dept.example"]
    subprocess.run([*argv, *subject, "-keyout", key, "-out", cert], check=True, capture_output=True)
    root = tmp_path / "root"
    argv = _deploy(root, "--tls-cert", str(pair / "c.pem"), "--tls-key", str(pair / "k.pem"))
    assert main(argv) == 0
    assert "TRIAL" not in capsys.readouterr().out
    tls = root / ETC / "tls"
    assert (tls / "cert.pem").read_text() == (pair / "c.pem").read_text()
    assert _mode(tls / "key.pem") == 0o600
    assert not (tls / "trial-self-signed-cert.pem").exists()
    assert main(_deploy(root, "--tls-cert", str(pair / "c.pem"))) == 2
    assert "--tls-key" in capsys.readouterr().err
