"""A course environment's packages never run as root: built in the sandbox, read as files.

A wheel may carry a top-level ``<name>.pth`` whose ``import`` line Python's
``site`` module runs at every start of that environment's interpreter. The
build therefore runs venv and pip as the sandbox account
(:mod:`coursehub.sandbox`), lists what was installed from the
``*.dist-info`` files without starting the new interpreter, and hands the
result to root, read-only for everybody else.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import zipfile
from pathlib import Path

import pytest

from coursehub.courseenv.errors import EnvBuildError
from coursehub.courseenv.pipconfig import parse_pip_config, plan_needs_network, plan_pip_env
from coursehub.courseenv.plan import plan_build_hidden
from coursehub.courseenv.seal import installed_packages, seal_build
from coursehub.errors import CoursehubError

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the build changes account as root only")


def pth_wheel(
    folder: Path,
    marker: Path,
    name: str = "chevil",
    version: str = "1.0",
    extra: dict[str, str] | None = None,
) -> Path:
    """Write a wheel whose ``<name>.pth`` appends ``uid=...`` to ``marker``; return it.

    ``extra``: more files of the wheel (path -> text), e.g. ``<name>-<version>.data/scripts/x``.
    """
    code = (
        f"import os, sys; open({str(marker)!r}, 'a')"
        ".write(f'uid={os.getuid()} argv={sys.argv[:3]}\\n')\n"
    )
    files = {
        f"{name}/__init__.py": "VALUE = 1\n",
        f"{name}.pth": code,
        f"{name}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ),
        f"{name}-{version}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        **(extra or {}),
    }

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = "".join(f"{p},{digest(c)},{len(c.encode())}\n" for p, c in files.items())
    files[f"{name}-{version}.dist-info/RECORD"] = record + f"{name}-{version}.dist-info/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_pip_config_list_is_read_as_section_key_value_lines():
    text = (
        "global.find-links='/opt/wheels'\n"
        "global.extra-index-url='file:///opt/pypi/simple'\n"
        "install.no-cache-dir='1'\n"
        ":env:.find-links='/opt/wheels /srv/more'\n"
        "not a line\n"
    )
    assert parse_pip_config(text) == {
        "find-links": "/opt/wheels /srv/more",
        "extra-index-url": "file:///opt/pypi/simple",
        "no-cache-dir": "1",
    }


def test_the_jobs_environment_has_the_sites_pip_settings_and_no_secret_or_redirection():
    environ = {
        "PATH": "/usr/bin",
        "PYTHONPATH": "/root/src",
        "VIRTUAL_ENV": "/root/venv",
        "JUPYTERHUB_API_TOKEN": "t",
        "COURSEHUB_DATABASE_URL": "sqlite:////x",
    }
    config = {"find-links": "/opt/wheels", "user": "1", "target": "/tmp/x", "timeout": "60"}
    env = plan_pip_env(environ, config, home="/tmp/job/home")
    assert env["PIP_FIND_LINKS"] == "/opt/wheels" and env["PIP_TIMEOUT"] == "60"
    assert env["PIP_CONFIG_FILE"] == os.devnull  # exactly the settings above, no other file
    assert env["HOME"] == "/tmp/job/home" and env["PATH"] == "/usr/bin"
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTERHUB_API_TOKEN", "COURSEHUB_DATABASE_URL"):
        assert name not in env
    assert "PIP_USER" not in env and "PIP_TARGET" not in env


@pytest.mark.parametrize(
    "config",
    [
        {"index-url": "https://deploy:s3cret@pypi.example/simple"},
        {"extra-index-url": "file:///opt/pypi https://u:p@x.example/simple"},
        {"client-cert": "/root/.pip/key.pem", "password": "x"},
    ],
)
def test_a_pip_setting_holding_a_credential_is_refused_in_one_line(config):
    with pytest.raises(CoursehubError, match="credential") as info:
        plan_pip_env({}, config, home="/h")
    assert "\n" not in str(info.value) and "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    ("config", "network"),
    [
        ({"find-links": "/opt/wheels", "no-index": "1"}, False),
        ({"index-url": "file:///opt/pypi/simple", "find-links": "/opt/wheels"}, False),
        ({"extra-index-url": "file:///opt/pypi/simple"}, True),  # pypi.org stays the index
        ({"index-url": "https://mirror.example/simple"}, True),
        ({"index-url": "file:///a", "find-links": "https://x.example/wheels"}, True),
        ({"no-index": "true", "find-links": "https://x.example/wheels"}, True),
    ],
)
def test_the_build_keeps_the_network_only_when_an_index_is_remote(config, network):
    assert plan_needs_network(config) is network


def test_the_build_hides_other_courses_its_logs_the_catalog_and_the_material(tmp_path):
    root = tmp_path / "shared"
    for sub in ("a/env/builds/old", "a/env/builds/new", "a/env/logs", "a/data", "a/kernels", "b"):
        (root / "courses" / sub).mkdir(parents=True)
    (root / "material").mkdir()
    environ = {
        "COURSEHUB_DATA_DIR": str(tmp_path / "data"),
        "COURSEHUB_MATERIAL_DIR": str(tmp_path / "material"),
    }
    hidden = plan_build_hidden(root, "a", root / "courses/a/env/builds/new", environ)
    courses = root / "courses"
    for folder in ("b", "a/data", "a/kernels", "a/env/logs", "a/env/builds/old"):
        assert str(courses / folder) in hidden
    assert str(courses / "a/env/builds/new") not in hidden and str(root / "material") in hidden
    assert {str(tmp_path / "data"), str(tmp_path / "material")} <= set(hidden)


def test_installed_packages_are_read_from_the_metadata_without_running_a_pth(tmp_path):
    marker = tmp_path / "marker"
    site = tmp_path / "build/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    with zipfile.ZipFile(pth_wheel(tmp_path / "w", marker)) as archive:
        archive.extractall(site)
    (site / "six-1.16.0.dist-info").mkdir()
    (site / "six-1.16.0.dist-info/METADATA").write_text("Name: six\nVersion: 1.16.0\n")
    assert installed_packages(tmp_path / "build") == ["chevil==1.0", "six==1.16.0"]
    assert not marker.exists()


def test_metadata_behind_a_link_out_of_the_build_is_not_read(tmp_path):
    outside = tmp_path / "root-home/python3.11/site-packages/secret-1.0.dist-info"
    outside.mkdir(parents=True)
    (outside / "METADATA").write_text("Name: secret\nVersion: 1.0\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build/lib").symlink_to(tmp_path / "root-home")
    assert installed_packages(tmp_path / "build") == []


def test_a_sealed_build_is_read_only_for_everybody_but_its_owner(tmp_path):
    build = tmp_path / "build"
    (build / "lib").mkdir(parents=True)
    (build / "lib/mod.py").write_text("x = 1\n")
    (build / "lib/mod.py").chmod(0o6777)
    (build / "lib").chmod(0o777)
    (build / "bin").mkdir()
    (build / "bin/python").symlink_to("/usr/bin/python3")
    seal_build(build)
    assert stat.S_IMODE((build / "lib/mod.py").stat().st_mode) == 0o755
    assert stat.S_IMODE((build / "lib").stat().st_mode) == 0o755
    assert (build / "bin/python").is_symlink()
    if os.geteuid() == 0:
        assert {p.lstat().st_uid for p in [build, *build.rglob("*")]} == {0}


@pytest.mark.parametrize("kind", ["fifo", "hardlink"])
def test_a_build_holding_a_special_file_or_a_hard_link_is_refused(tmp_path, kind):
    build = tmp_path / "build"
    build.mkdir()
    if kind == "fifo":
        os.mkfifo(build / "pipe")
    else:
        (tmp_path / "outside").write_text("x")
        os.link(tmp_path / "outside", build / "inside")
    with pytest.raises(EnvBuildError, match="build holds"):
        seal_build(build)


def env_build_setup(open_tmp: Path, sqlite_template: Path, monkeypatch) -> tuple[str, list[str]]:
    """A seeded catalog, ``open_tmp/wheels`` on pip's find-links; return the course and options.

    The options are ``--root SHARED --database-url URL`` of ``coursehub env set|build``.
    """
    import shutil

    from coursehub.web.testing import seed_web_catalog

    catalog = open_tmp / "catalog"
    catalog.mkdir(mode=0o700)
    shutil.copyfile(sqlite_template, catalog / "catalog.sqlite")
    url = f"sqlite:///{catalog / 'catalog.sqlite'}"
    course_id = seed_web_catalog(url)
    wheels = open_tmp / "wheels"
    wheels.mkdir(mode=0o755, exist_ok=True)
    found = " ".join(filter(None, [os.environ.get("PIP_FIND_LINKS", ""), str(wheels)]))
    monkeypatch.setenv("PIP_FIND_LINKS", found)
    monkeypatch.setenv("COURSEHUB_DATA_DIR", str(catalog))
    return course_id, ["--root", str(open_tmp / "shared"), "--database-url", url]


@ROOT_ONLY
@pytest.mark.slow
def test_a_wheels_pth_never_runs_as_root_during_coursehub_env_build(
    open_tmp, sqlite_template, monkeypatch
):
    from coursehub.cli import main
    from coursehub.courseenv.layout import env_paths, read_log_tail, read_state
    from coursehub.sandbox.account import sandbox_user_name

    course_id, common = env_build_setup(open_tmp, sqlite_template, monkeypatch)
    root = open_tmp / "shared"
    drop = open_tmp / "drop"
    drop.mkdir()
    drop.chmod(0o1777)  # any account may write the marker: its uid says who ran the .pth
    marker = drop / "marker.txt"
    pth_wheel(open_tmp / "wheels", marker)
    assert main(["env", "set", course_id, "--packages", "chevil==1.0", "six", *common]) == 0
    assert main(["env", "build", course_id, *common]) == 0

    seen = marker.read_text() if marker.exists() else ""
    assert "uid=0 " not in seen, seen
    paths = env_paths(root, course_id)
    state = read_state(paths)
    assert state["status"] == "ok"
    names = {package.partition("==")[0] for package in state["packages"]}
    assert "chevil==1.0" in state["packages"] and {"six", "ipykernel"} <= names  # honest ones too
    assert f"mode, as {sandbox_user_name()}," in read_log_tail(paths, state["log"])
    build = paths.builds / state["build"]
    entries = [build, *build.rglob("*")]
    assert {p.lstat().st_uid for p in entries} == {0}
    writable = [p for p in entries if not p.is_symlink() and p.lstat().st_mode & 0o022]
    assert writable == []


@ROOT_ONLY
def test_a_shared_root_the_sandbox_account_cannot_enter_fails_the_build_in_one_line(tmp_path):
    from coursehub.courseenv.build import build_environment
    from coursehub.courseenv.layout import env_paths, read_state

    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    paths = env_paths(closed / "shared", "a-2025")
    paths.home.mkdir(parents=True)
    paths.requirements.write_text("six\n")
    with pytest.raises(EnvBuildError, match=r"a-2025: the sandbox account .* cannot enter") as info:
        build_environment(closed / "shared", "a-2025")
    assert "\n" not in str(info.value)
    assert read_state(paths)["status"] == "failed"
    assert [p for p in paths.builds.iterdir()] == []


def test_a_site_index_url_with_a_password_fails_the_build_and_the_secret_is_not_shown(
    open_tmp, monkeypatch
):
    from coursehub.courseenv.build import build_environment
    from coursehub.courseenv.layout import env_paths, read_log_tail, read_state

    monkeypatch.setenv("PIP_INDEX_URL", "https://deploy:s3cret@pypi.example/simple")
    paths = env_paths(open_tmp / "shared", "a-2025")
    paths.home.mkdir(parents=True)
    paths.requirements.write_text("six\n")
    with pytest.raises(EnvBuildError, match=r"^course a-2025: the site's pip setting index-url"):
        build_environment(open_tmp / "shared", "a-2025")
    state = read_state(paths)
    assert state["status"] == "failed" and "s3cret" not in state["error"]
    assert "s3cret" not in read_log_tail(paths, state["log"])
    assert list(paths.builds.iterdir()) == []


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        ({"python": "python3", "python3": "/usr/bin/python3"}, None, []),
        ({"python": "python3"}, {"python": None}, ["python"]),  # a script in its place
        ({"python": "python3"}, {"python": "python3", "python3.11": None}, ["python3.11"]),
        ({"python": "python3", "python3": "/usr/bin/python3"}, {"python": "python3"}, ["python3"]),
    ],
)
def test_a_package_that_replaces_the_interpreter_is_found(before, after, changed):
    from coursehub.courseenv.seal import plan_interpreter_change

    assert plan_interpreter_change(before, before if after is None else after) == changed


@ROOT_ONLY
@pytest.mark.slow
def test_a_wheel_replacing_bin_python_fails_the_build_and_the_previous_one_stays(
    open_tmp, sqlite_template, monkeypatch
):
    from coursehub.cli import main
    from coursehub.courseenv.layout import env_paths, read_state

    course_id, common = env_build_setup(open_tmp, sqlite_template, monkeypatch)
    root = open_tmp / "shared"
    script = "#!/bin/sh\necho not python\n"
    extra = {"chbad-1.0.data/scripts/python": script, "chbad-1.0.data/scripts/python3": script}
    pth_wheel(open_tmp / "wheels", open_tmp / "unused", name="chbad", extra=extra)
    assert main(["env", "set", course_id, "--packages", "chbad==1.0", *common]) == 0
    assert main(["env", "build", course_id, *common]) != 0
    state = read_state(env_paths(root, course_id))
    assert state["status"] == "failed"
    assert "replaced the environment's interpreter (bin/python, bin/python3)" in state["error"]
