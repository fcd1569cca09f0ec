"""A backup of an install made by ``coursehub deploy`` holds its secrets where deploy put them.

The install is written below a temporary root by the deploy code itself
(:func:`coursehub.deploy.install.make_plan` and ``apply_plan``, as
``coursehub deploy --root DIR`` does); the backup finds the cookie secret,
``secrets.env``, ``web.env`` and the TLS pair under ``etc/coursehub`` from the
hub folder ``var/lib/coursehub/hub``, and a restore into a new root puts them
back byte for byte, mode 0600, same owner.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from coursehub.cli import main
from coursehub.deploy.layout import DeployLayout

#: The deploy layout's files a backup must give back as they were.
SECRETS = {
    "hub/cookie-secret": "etc/coursehub/jupyterhub_cookie_secret",
    "deploy/secrets.env": "etc/coursehub/secrets.env",
    "deploy/web.env": "etc/coursehub/web.env",
}
TLS_KEY = "etc/coursehub/tls/trial-self-signed-key.pem"


def deploy_into(root: Path) -> DeployLayout:
    """Install below ``root`` with the deploy code's own plan and steps; give the hub a
    database (the hub makes it at its first start)."""
    from coursehub.deploy.install import DeployOptions, apply_plan, make_plan

    layout = DeployLayout(root=root)
    options = DeployOptions(layout=layout, python=sys.executable, proxy="/usr/bin/true")
    apply_plan(options, make_plan(options), "hub.test")
    hub_db = layout.on_disk(layout.hub_dir) / "jupyterhub.sqlite"
    with sqlite3.connect(hub_db) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('p2500001')")
    db.close()
    return layout


def enter(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every other part below ``root`` (as the install's coursehub.env, with its root);
    return the hub folder to give ``--hub-dir``."""
    var = root / "var/lib/coursehub"
    monkeypatch.setenv("COURSEHUB_DATA_DIR", str(var))
    monkeypatch.setenv("COURSEHUB_DATABASE_URL", f"sqlite:///{var / 'catalog.sqlite'}")
    monkeypatch.setenv("COURSEHUB_GRADING_COURSES", str(root / "srv/nbgrader/courses"))
    monkeypatch.setenv("COURSEHUB_GRADING_EXCHANGE", str(root / "srv/nbgrader/exchange"))
    monkeypatch.delenv("COURSEHUB_USAGE_DIR", raising=False)
    return var / "hub"


@pytest.fixture
def deployed(tmp_path, monkeypatch, capsys):
    """An install below ``tmp_path/first`` and its backup: (root, archive, backup's output)."""
    root = tmp_path / "first"
    deploy_into(root)
    archive = tmp_path / "backup.tar.gz"
    capsys.readouterr()
    assert main(["backup", str(archive), "--hub-dir", str(enter(root, monkeypatch))]) == 0
    return root, archive, capsys.readouterr().out


def test_the_hub_folder_of_a_deploy_layout_names_its_root():
    from coursehub.backup.sources import default_hub_dir, deploy_root

    assert deploy_root(Path("/var/lib/coursehub/hub")) == Path("/")
    assert deploy_root(Path("/tmp/x/var/lib/coursehub/hub")) == Path("/tmp/x")
    assert deploy_root(Path("/srv/jupyterhub")) is None
    assert deploy_root(Path("/var/lib/coursehub")) is None
    assert default_hub_dir(Path("/nonexistent")) == Path("/nonexistent/srv/jupyterhub")


def test_a_backup_of_a_deploy_layout_holds_its_secrets_from_their_places(deployed):
    from coursehub.backup.sources import default_hub_dir

    root, archive, out = deployed
    for name, path in SECRETS.items():
        assert f"backed up {name}: {root / path}\n" in out, out
    assert f"backed up deploy/tls: {root / 'etc/coursehub/tls'}\n" in out
    assert "skipped hub/" not in out and "skipped deploy/" not in out, out
    with tarfile.open(archive) as tar:
        for name, path in SECRETS.items():
            member = tar.getmember(f"data/{name}")
            assert tar.extractfile(member).read() == (root / path).read_bytes(), name
            assert member.mode == 0o600, name
    assert default_hub_dir(root) == root / "var/lib/coursehub/hub"


def _same_file(before: Path, after: Path) -> None:
    assert after.read_bytes() == before.read_bytes(), after
    assert stat.S_IMODE(after.stat().st_mode) == 0o600, after
    owner = before.stat()
    assert (after.stat().st_uid, after.stat().st_gid) == (owner.st_uid, owner.st_gid)


def test_a_restore_into_a_new_root_puts_the_secrets_back_as_they_were(
    deployed, tmp_path, monkeypatch, capsys
):
    root, archive, _out = deployed
    fresh = tmp_path / "fresh"
    hub = enter(fresh, monkeypatch)
    assert main(["restore", str(archive), "--hub-dir", str(hub)]) == 0, capsys.readouterr().err
    assert f"restored hub/cookie-secret: {fresh / SECRETS['hub/cookie-secret']}" in (
        capsys.readouterr().out
    )
    for path in [*SECRETS.values(), TLS_KEY]:
        _same_file(root / path, fresh / path)


def test_a_restore_over_a_new_install_gives_back_the_old_secrets(
    deployed, tmp_path, monkeypatch, capsys
):
    root, archive, _out = deployed
    fresh = tmp_path / "second"
    deploy_into(fresh)  # a new machine: its own cookie secret, token and TLS pair
    cookie = SECRETS["hub/cookie-secret"]
    assert (fresh / cookie).read_bytes() != (root / cookie).read_bytes()
    hub = enter(fresh, monkeypatch)
    capsys.readouterr()
    assert main(["restore", str(archive), "--hub-dir", str(hub)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hub/cookie-secret" in err and "--force" in err, err
    assert main(["restore", "--force", str(archive), "--hub-dir", str(hub)]) == 0
    for path in [*SECRETS.values(), TLS_KEY]:
        _same_file(root / path, fresh / path)


def test_a_missing_secret_is_named_in_one_line(tmp_path, monkeypatch, capsys):
    from coursehub.backup.record import read_record
    from coursehub.doctor.backupcheck import check_backup

    root = tmp_path / "first"
    layout = deploy_into(root)
    layout.on_disk(layout.cookie_secret).unlink()
    hub = enter(root, monkeypatch)
    for folder in ("srv/nbgrader/courses", "srv/nbgrader/exchange", "var/lib/coursehub/books"):
        (root / folder).mkdir(parents=True)
    (root / "var/lib/coursehub/material").mkdir()
    archive = tmp_path / "backup.tar.gz"
    capsys.readouterr()
    assert main(["backup", str(archive), "--hub-dir", str(hub)]) == 0
    captured = capsys.readouterr()
    cookie = layout.on_disk(layout.cookie_secret)
    assert f"skipped hub/cookie-secret: no file {cookie}\n" in captured.out, captured.out
    assert "Traceback" not in captured.out + captured.err
    record = root / "var/lib/coursehub/last-backup.json"
    assert read_record(record).skipped == ("hub/cookie-secret", "lti/tool-key.pem")
    result = check_backup(record)
    assert result.level == "warn" and "hub/cookie-secret" in result.line, result.line


def test_a_deploy_backup_restored_where_there_is_no_deploy_layout_names_the_part(
    deployed, tmp_path, monkeypatch, capsys
):
    _root, archive, _out = deployed
    fresh = tmp_path / "demo"
    enter(fresh, monkeypatch)
    capsys.readouterr()
    assert main(["restore", str(archive), "--hub-dir", str(fresh / "hub")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "holds deploy/secrets.env" in err and "--hub-dir" in err, err
    assert not os.path.exists(fresh / "hub")


def _verifier_matches(verifier: str, password: str, role: str) -> bool:
    """Whether a password verifier of pg_authid is the one of ``password``: ``md5`` and the
    MD5 of password and role name, or ``SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey``
    (RFC 5802, section 3; RFC 7677)."""
    import base64
    import hashlib
    import hmac

    if verifier.startswith("md5"):
        return verifier == "md5" + hashlib.md5((password + role).encode()).hexdigest()
    method, rest = verifier.split("$", 1)
    if method != "SCRAM-SHA-256":
        return False
    counts, keys = rest.split("$")
    iterations, salt = counts.split(":")
    stored = base64.b64decode(keys.split(":")[0])
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(salt), int(iterations)
    )
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return hashlib.sha256(client_key).digest() == stored


def test_a_restored_secrets_env_gives_the_catalog_role_its_password(postgres_server, tmp_path):
    import uuid

    import psycopg

    from coursehub.backup.databases import align_role_password

    role = f"restore_{uuid.uuid4().hex[:12]}"
    postgres_server.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'made-by-the-new-install'")
    url = postgres_server.url("postgres").replace("postgres@", f"{role}:made-by-the-new-install@")
    env = tmp_path / "secrets.env"
    env.write_text("# restored\nCOURSEHUB_DB_PASSWORD=it's-the-old-one\n")
    try:
        align_role_password(url, env)
        with psycopg.connect(
            host=str(postgres_server.root), port=postgres_server.port, user="postgres"
        ) as conn:
            (verifier,) = conn.execute(
                "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)
            ).fetchone()
        assert _verifier_matches(verifier, "it's-the-old-one", role), verifier
        env.write_text("COURSEHUB_SERVICE_TOKEN=abc\n")  # SQLite installs: no password, no change
        align_role_password(url, env)
    finally:
        postgres_server.execute(f"DROP ROLE IF EXISTS {role}")
