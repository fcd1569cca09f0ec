"""``coursehub doctor``: each check passing and failing, with real parts where they are cheap.

Real: SQLite catalogs (at the newest and at an old revision), PostgreSQL's
clock, the sandbox's probe as root, this host's cgroup file system, the test
hub, a data folder on a loop-mounted ext4 as root. Stand-ins, said so in
each test: a far-off database clock and an ``scontrol`` script (the Slurm
daemons are shared by the machine's users).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coursehub.catalog.db import make_engine
from coursehub.catalog.schema import head_revision, upgrade_database
from coursehub.cli import main
from coursehub.doctor import catalogcheck, host, hubcheck
from coursehub.doctor.result import (
    CheckResult,
    Thresholds,
    exit_status,
    format_json,
    format_report,
    thresholds_from_env,
)
from coursehub.errors import UsageError
from coursehub.hub.ltiplatforms import plan_https_warning
from helpers import free_port
from loopfs import fill, loop_mount

MOODLE = """
[[platform]]
issuer = "https://moodle.univ.example.fr"
client_ids = ["Xy12AbC"]
deployment_ids = ["3"]
authorize_url = "https://moodle.univ.example.fr/mod/lti/auth.php"
jwks_url = "https://moodle.univ.example.fr/mod/lti/certs.php"
"""


def old_catalog(tmp_path: Path) -> str:
    """A SQLite catalog migrated only to the first revision: migrations are pending."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    engine = make_engine(url)
    try:
        upgrade_database(engine, "0001")
    finally:
        engine.dispose()
    return url


# --- the report -------------------------------------------------------------------------


def test_the_report_has_one_line_per_check_and_fails_only_on_a_failure():
    results = [CheckResult("a", "ok", "fine"), CheckResult("b", "warn", "careful")]
    assert format_report(results) == "ok    a: fine\nwarn  b: careful\n"
    assert exit_status(results) == 0
    results.append(CheckResult("c", "fail", "broken"))
    assert format_report(results).splitlines()[-1] == "FAIL  c: broken"
    assert exit_status(results) == 1
    body = json.loads(format_json(results))
    assert body["status"] == 1 and body["checks"][2] == {
        "name": "c",
        "level": "fail",
        "line": "broken",
    }


def test_thresholds_come_from_the_environment_and_refuse_nonsense():
    assert thresholds_from_env({}) == Thresholds()
    read = thresholds_from_env({"COURSEHUB_DOCTOR_DISK_WARN": "80", "COURSEHUB_DOCTOR_NAMED": "3"})
    assert (read.disk_warn, read.named, read.disk_fail) == (80.0, 3, 98.0)
    with pytest.raises(UsageError, match="COURSEHUB_DOCTOR_NAMED='three' must be a positive int"):
        thresholds_from_env({"COURSEHUB_DOCTOR_NAMED": "three"})


# --- catalog and clock ------------------------------------------------------------------


def test_a_current_catalog_passes(sqlite_template):
    result = catalogcheck.check_catalog(f"sqlite:///{sqlite_template}")
    assert result.level == "ok" and head_revision() in result.line


def test_a_catalog_at_an_old_revision_fails_with_the_upgrade_to_run(tmp_path):
    result = catalogcheck.check_catalog(old_catalog(tmp_path))
    assert result.level == "fail"
    assert "is at revision 0001, older than" in result.line
    assert result.line.endswith("run `coursehub db upgrade`")


def test_an_unreachable_catalog_fails_naming_it(tmp_path):
    url = f"sqlite:///{tmp_path}"  # a folder: SQLite cannot open it
    result = catalogcheck.check_catalog(url)
    assert result.level == "fail" and "cannot open the catalog database" in result.line


def test_sqlite_has_no_server_clock(sqlite_template):
    assert catalogcheck.check_clock(f"sqlite:///{sqlite_template}").level == "skip"


@pytest.mark.integration
def test_the_postgresql_clock_agrees_with_this_hosts(postgres_server):
    result = catalogcheck.check_clock(postgres_server.url("postgres"), limit_s=5)
    assert result.level == "ok", result.line


def test_a_far_off_database_clock_warns():
    """Stand-in: no PostgreSQL server with a wrong clock can be had here: its reading is given."""
    url = "postgresql+psycopg://coursehub@127.0.0.1:1/catalog"
    far = datetime(2020, 1, 1, tzinfo=UTC)
    result = catalogcheck.check_clock(url, 5, read_clock=lambda engine: far)
    assert result.level == "warn"
    assert "ahead of postgresql+psycopg://coursehub@127.0.0.1:1/catalog" in result.line
    assert result.line.endswith("turn on NTP on both hosts")


# --- sandbox and cgroups ----------------------------------------------------------------


@pytest.mark.root
def test_the_sandbox_account_runs_the_interpreter(sandbox_user):
    from coursehub.sandbox.account import ensure_sandbox_account

    ensure_sandbox_account(sandbox_user)
    result = host.check_sandbox()
    assert result.level == "ok" and sandbox_user in result.line
    assert result.line.endswith(f"runs {sys.executable}")


@pytest.mark.root
def test_a_sandbox_that_cannot_start_its_interpreter_fails(sandbox_user):
    from coursehub.sandbox.account import ensure_sandbox_account

    ensure_sandbox_account(sandbox_user)
    result = host.check_sandbox(python="/nonexistent/bin/python3")
    assert result.level == "fail" and "cannot run /nonexistent/bin/python3" in result.line


@pytest.mark.root
def test_a_missing_sandbox_account_is_named_with_its_useradd(sandbox_user):
    result = host.check_sandbox()
    assert result.level == "warn"
    assert f"the sandbox account {sandbox_user} does not exist yet" in result.line
    assert "useradd" in result.line


@pytest.mark.root
def test_this_venv_imports_jsonschema_without_building_rfc3987_syntaxs_parsers():
    # make setup removes rfc3987-syntax (about 0.7 s of CPU at every Jupyter start)
    code = "import sys, jsonschema; print('rfc3987_syntax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
    result = host.check_jupyter_start()
    assert result.level == "ok", result.line


def test_rfc3987_syntax_installed_without_rfc3987_warns_with_the_uninstall():
    # a stand-in for importlib.util.find_spec: which modules are "installed"
    def installed(*names):
        return lambda name: object() if name in names else None

    said = host.check_jupyter_start(installed("jsonschema", "rfc3987_syntax"))
    assert said.level == "warn" and said.name == "jupyter start"
    assert "pip uninstall -y rfc3987-syntax" in said.line and "0.7 s of CPU" in said.line
    assert (
        host.check_jupyter_start(installed("jsonschema", "rfc3987", "rfc3987_syntax")).level == "ok"
    )
    assert host.check_jupyter_start(installed()).level == "skip"


def test_this_hosts_cgroup_controllers_are_writable_as_root():
    assert host.check_cgroups().level == "ok"


def test_no_cgroup_controllers_fail_naming_the_mount(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/\n")
    result = host.check_cgroups(tmp_path, proc)
    assert result.level == "fail"
    assert f"no cpu and memory cgroup controllers under {tmp_path}" in result.line


# --- hub --------------------------------------------------------------------------------


def test_no_hub_configured_is_skipped():
    assert hubcheck.check_hub(environ={}).level == "skip"


def test_an_unreachable_hub_fails():
    env = {
        "COURSEHUB_HUB_API_URL": f"http://127.0.0.1:{free_port()}",
        "COURSEHUB_HUB_API_TOKEN": "x",
    }
    result = hubcheck.check_hub(environ=env)
    assert result.level == "fail" and "is unreachable" in result.line


@pytest.mark.integration
def test_the_hub_answers_with_the_sync_tokens_scopes(live_hub):
    env = {"COURSEHUB_HUB_API_URL": live_hub.api_url, "COURSEHUB_HUB_API_TOKEN": live_hub.token}
    result = hubcheck.check_hub(environ=env)
    assert result.level == "ok", result.line
    assert "the token of coursehub-sync has admin:users" in result.line


@pytest.mark.integration
def test_a_wrong_token_and_a_missing_scope_fail(live_hub):
    env = {"COURSEHUB_HUB_API_URL": live_hub.api_url, "COURSEHUB_HUB_API_TOKEN": "0" * 64}
    refused = hubcheck.check_hub(environ=env)
    assert refused.level == "fail" and "refused the token (403" in refused.line
    env["COURSEHUB_HUB_API_TOKEN"] = live_hub.token
    lacking = hubcheck.check_hub(environ=env, scopes=(*hubcheck.SYNC_SCOPES, "admin:services"))
    assert lacking.level == "fail" and "lacks the scopes admin:services" in lacking.line


# --- slurm ------------------------------------------------------------------------------


def fake_scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Stand-in ``scontrol`` first on PATH: the machine's Slurm daemons are shared."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "scontrol"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_slurm_is_skipped_where_jobs_run_locally():
    assert host.check_slurm({"COURSEHUB_RUNNER_BACKEND": "local"}).level == "skip"


def test_a_controller_that_is_up_passes(tmp_path, monkeypatch):
    fake_scontrol(tmp_path, monkeypatch, 'echo "Slurmctld(primary) at ctl is UP"')
    result = host.check_slurm({"COURSEHUB_RUNNER_BACKEND": "slurm"})
    assert result == CheckResult("slurm", "ok", "Slurmctld(primary) at ctl is UP")


def test_a_controller_that_is_down_or_silent_fails(tmp_path, monkeypatch):
    fake_scontrol(tmp_path, monkeypatch, 'echo "Slurmctld(primary) at ctl is DOWN"; exit 1')
    down = host.check_slurm({"COURSEHUB_RUNNER_BACKEND": "slurm"})
    assert down.level == "fail"


def test_a_controller_that_does_not_answer_in_time_fails(tmp_path, monkeypatch):
    fake_scontrol(tmp_path, monkeypatch, "exec sleep 30")
    result = host.check_slurm({"COURSEHUB_RUNNER_BACKEND": "slurm"}, timeout_s=0.5)
    assert result.level == "fail" and "gave no answer in 0.5 s" in result.line


# --- data disk --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("percent", "level"), [(10, "ok"), (89.9, "ok"), (90, "warn"), (97.9, "warn"), (98, "fail")]
)
def test_disk_levels(percent, level):
    assert host.disk_level(percent, 90, 98) == level


@pytest.mark.root
def test_the_data_disk_passes_empty_and_fails_full(tmp_path):
    with loop_mount(tmp_path, 32, "ext4") as disk:
        data = disk / "coursehub"
        data.mkdir()
        assert host.check_data_disk(data).level == "ok"
        fill(data)
        full = host.check_data_disk(data / "not-made-yet")
        assert full.level == "fail"
        assert "is 100 % full" in full.line and "above 98 %" in full.line


# --- LTI --------------------------------------------------------------------------------


def test_lti_over_plain_http_fails_with_the_words_of_hub_config(tmp_path):
    registrations = tmp_path / "lti.toml"
    registrations.write_text(MOODLE)
    result = hubcheck.check_lti(str(registrations), "http://:8000", "http://hub.example.org/")
    assert result == CheckResult(
        "lti", "fail", plan_https_warning("http://:8000", "http://hub.example.org/")
    )
    assert "LMS launches need the hub served over HTTPS" in result.line


def test_lti_over_https_passes_and_no_lti_is_skipped(tmp_path):
    registrations = tmp_path / "lti.toml"
    registrations.write_text(MOODLE)
    assert (
        hubcheck.check_lti(str(registrations), "http://:8000", "https://hub.example.org/").level
        == "ok"
    )
    assert hubcheck.check_lti(None, "http://:8000").level == "skip"


# --- the command ------------------------------------------------------------------------


def test_the_command_prints_every_check_and_exits_1_on_a_pending_migration(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("COURSEHUB_HUB_API_URL", raising=False)
    monkeypatch.delenv("JUPYTERHUB_API_URL", raising=False)
    argv = ["doctor", "--json", "--database-url", old_catalog(tmp_path), "--homes", str(tmp_path)]
    assert main(argv) == 1
    body = json.loads(capsys.readouterr().out)
    levels = {check["name"]: check["level"] for check in body["checks"]}
    assert levels["catalog"] == "fail" and levels["hub"] == "skip" and body["status"] == 1
    assert set(levels) == {
        "catalog",
        "clock",
        "sandbox",
        "cgroups",
        "jupyter start",
        "hub",
        "slurm",
        "slurm-watch",
        "data disk",
        "homes",
        "lti",
        "budgets",
        "backup",
    }
    assert levels["budgets"] == "skip"  # the catalog is not at its newest revision


# --- weekly budgets ----------------------------------------------------------------------


def test_a_budget_nothing_checks_warns_and_one_checked_passes(sqlite_template, tmp_path):
    from coursehub.catalog.budgets import set_course_budget
    from coursehub.catalog.courses import create_course, create_portal, create_year
    from coursehub.catalog.db import session_scope
    from coursehub.doctor.budgets import check_budgets
    from coursehub.meter.budget import WeeklyBudget

    path = tmp_path / "catalog.sqlite"
    path.write_bytes(sqlite_template.read_bytes())
    url = f"sqlite:///{path}"
    assert check_budgets(url, {}).level == "ok"  # no budget anywhere: nothing to check
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            year, portal = create_year(session, "2026-2027"), create_portal(session, "MECA", "M")
            course = create_course(session, "UEPHY1", "Physique", year, portal)
            set_course_budget(course, WeeklyBudget(cpu_hours=10.0))
    finally:
        engine.dispose()
    unchecked = check_budgets(url, {})
    assert unchecked.level == "warn"
    assert "1 course(s)" in unchecked.line and "COURSEHUB_BUDGET_URL is unset" in unchecked.line
    checked = check_budgets(url, {"COURSEHUB_BUDGET_URL": "http://127.0.0.1:8081/services/x"})
    assert checked.level == "ok" and "http://127.0.0.1:8081/services/x" in checked.line
    assert check_budgets(f"sqlite:///{tmp_path / 'none' / 'x.sqlite'}", {}).level == "skip"
