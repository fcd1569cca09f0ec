"""Every server and job is charged to its course and its student; a hub reads only its own records.

The report: a student of one course starts without a spawn form, so the
server's ``user_options`` were ``{}``: its usage records had an empty course,
``COURSEHUB_COURSE_ID`` was missing from its environment and the team's
servers page showed no course; a runner job in a demo server (the hub's own
Unix account) was charged to that account; and every hub of a host wrote to
``/run/coursehub/usage``, so an ingest read other hubs' users too. Here real
cgroup spawners start real processes under :class:`CourseProfiles`, and the
catalog ingests what they wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from cgrouptree import remove_cgroup_tree
from coursehub.catalog.models.usage import UsageUnit
from coursehub.catalog.usage.ingest import ingest_hub
from coursehub.contract import make_profile, profile_to_json
from coursehub.meter.hubhook import hub_usage_dir, open_server_usage
from coursehub.meter.journal import USAGE_DIR_VAR, hub_usage_folder
from coursehub.meter.sampler import COURSE_VAR, HUB_USER_VAR, job_user
from coursehub.resources.cgroups import JobCgroup
from coursehub.runner.api import submit
from coursehub.runner.local import LocalBackend
from coursehub.runner.slots import SlotPool
from coursehub.spawn.cgroupspawner import CgroupSimpleLocalProcessSpawner
from coursehub.spawn.spawner import CourseProfiles, plan_user_options

COURSE = "mlmeca-2026"
PROFILE = make_profile("m2", cpu_limit=1, mem_limit="1G", n_threads=1)
#: CPU-seconds the server's process burns (its own clock).
CPU_COST_S = 0.5
BUSY = textwrap.dedent(
    f"""
    import time
    start = time.process_time()
    while time.process_time() - start < {CPU_COST_S}:
        pass
    """
)


@pytest.fixture(autouse=True)
def _no_usage_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each hub's own default folder, never a folder given to the whole test run."""
    monkeypatch.delenv(USAGE_DIR_VAR, raising=False)
    monkeypatch.delenv(COURSE_VAR, raising=False)
    monkeypatch.delenv(HUB_USER_VAR, raising=False)


@pytest.fixture
def servers_parent() -> Iterator[str]:
    """A fresh ``cgroup_parent``; every ``{name}-{hub_id}`` cgroup left is emptied and removed."""
    from coursehub.resources.cgroups import CgroupUnavailableError, job_cgroup_bases

    if os.geteuid() != 0:
        pytest.skip("needs root to make cgroups")
    try:
        _, cpu_base, mem_base = job_cgroup_bases()
    except CgroupUnavailableError as exc:
        pytest.skip(f"no writable cgroup filesystem: {exc}")
    name = f"chusage-{uuid.uuid4().hex[:8]}"
    yield name
    for base in {cpu_base, mem_base, Path("/sys/fs/cgroup/cpuacct")}:
        for parent in base.glob(f"{name}-*"):
            remove_cgroup_tree(parent)


def course_student(tmp_path: Path, parent: str, hub_id: str = "hubA", name: str = "ada") -> object:
    """A cgroup spawner of a student of one course (one course group with its profile)."""
    group = SimpleNamespace(
        name=f"nbgrader-{COURSE}", properties={"profile": profile_to_json(PROFILE)}
    )
    user = SimpleNamespace(name=name, groups=[group], url=f"/user/{name}/")
    return CgroupSimpleLocalProcessSpawner(
        user=user,
        name="",
        home_dir_template=str(tmp_path / "homes" / "{username}"),
        runtime_dir=str(tmp_path / "run"),
        hub_id=hub_id,
        cgroup_parent=parent,
        device_isolation="best-effort",
    )


def run_server(spawner: object) -> None:
    """Make the server's cgroup, run a busy process in it as the server would, stop it."""
    spawner._cgroup = spawner.ensure_cgroup()  # type: ignore[attr-defined]
    assert spawner._cgroup is not None  # type: ignore[attr-defined]
    child = subprocess.Popen(
        [sys.executable, "-c", BUSY],
        preexec_fn=spawner.make_preexec_fn(spawner.user.name),  # type: ignore[attr-defined]
    )
    assert child.wait(timeout=60) == 0
    spawner.remove_cgroup()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "course_id", "expected"),
    [
        ({}, COURSE, {"course": COURSE}),
        ({"course": "not-mine"}, COURSE, {"course": COURSE}),
        ({"course": "x", "other": 1}, "", {"other": 1}),
    ],
)
def test_user_options_name_the_course_the_server_runs_under(options, course_id, expected):
    assert plan_user_options(options, course_id) == expected


@pytest.mark.root
def test_a_one_course_students_server_without_a_form_is_charged_to_that_course(
    tmp_path, servers_parent, session
):
    spawner = course_student(tmp_path, servers_parent)
    profiles = CourseProfiles("local", gpu_ids=[], state_path=tmp_path / "gpus.json")
    assert profiles.options_form(spawner) == ""  # no spawn form: user_options stay {}
    profiles.apply(spawner, {})
    run_server(spawner)

    assert spawner.user_options == {"course": COURSE}  # the hub API's "Started for"
    assert spawner.environment[COURSE_VAR] == COURSE
    outcome = ingest_hub(session, hub_usage_dir(tmp_path / "run", "hubA"))
    assert outcome.refused == []
    (unit,) = session.query(UsageUnit).all()
    assert (unit.kind, unit.username, unit.course_id) == ("server", "ada", COURSE)
    assert unit.cpu_s >= CPU_COST_S * 0.95


@pytest.mark.root
def test_two_hubs_of_one_host_each_read_only_their_own_servers(tmp_path, servers_parent, session):
    for hub_id in ("hubA", "hubB"):  # the same user on two hubs sharing /run/coursehub
        spawner = course_student(tmp_path, servers_parent, hub_id=hub_id)
        CourseProfiles("local", gpu_ids=[], state_path=tmp_path / "gpus.json").apply(spawner, {})
        run_server(spawner)

    folder_a = hub_usage_dir(tmp_path / "run", "hubA")
    assert ingest_hub(session, folder_a).refused == []
    units = session.query(UsageUnit).all()
    assert [u.unit_id.split(":")[1] for u in units] == ["hubA"]
    assert folder_a == hub_usage_folder(tmp_path / "run", "hubA") == tmp_path / "run/usage-hubA"


def test_a_job_is_charged_to_the_servers_hub_user():
    assert job_user({HUB_USER_VAR: "ada"}) == "ada"
    assert job_user({}) == job_user({HUB_USER_VAR: " "}) != "ada"  # the Unix user


@pytest.mark.root
def test_a_job_in_a_demo_server_lands_in_its_students_course(
    tmp_path, cgroup_parent, session, monkeypatch
):
    # a demo server: the hub's own account (shares_hub_account), course from the profile
    spawner = SimpleNamespace(
        user=SimpleNamespace(name="ada"),
        name="",
        user_options={"course": COURSE},
        runtime_dir=str(tmp_path / "run"),
        hub_id="hubA",
        cgroup_root="/sys/fs/cgroup",
        proc_cgroup="/proc/self/cgroup",
        visible_gpus=[],
        environment={},
        shares_hub_account=True,
    )
    cgroup = open_server_usage(spawner, JobCgroup.create("server", None, None, cgroup_parent))
    cgroup.remove()
    folder = hub_usage_dir(tmp_path / "run", "hubA")
    assert spawner.environment == {COURSE_VAR: COURSE, USAGE_DIR_VAR: str(folder)}

    # a runner job started in that server: its environment, JupyterHub's JUPYTERHUB_USER
    for name, value in {**spawner.environment, HUB_USER_VAR: "ada"}.items():
        monkeypatch.setenv(name, value)
    script = tmp_path / "busy.py"
    script.write_text(BUSY)
    backend = LocalBackend(tmp_path / "runs", SlotPool(tmp_path / "slots", 1), use_cgroups=False)
    assert submit(str(script), backend=backend, name="busy").wait(timeout_s=120).returncode == 0

    assert ingest_hub(session, folder).refused == []
    units = {u.kind: u for u in session.query(UsageUnit)}
    assert (units["job"].username, units["job"].course_id) == ("ada", COURSE)
